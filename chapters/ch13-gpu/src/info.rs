//! `ch13-gpu info`: every adapter wgpu sees, with what a compute chapter needs to know of it.

use serde_json::{Value, json};

/// The facts about one adapter, as JSON (what `--json` prints, and what the text is made of).
pub fn describe(adapter: &wgpu::Adapter) -> Value {
    let i = adapter.get_info();
    let l = adapter.limits();
    let f = adapter.features();
    json!({
        "name": i.name,
        "backend": i.backend.to_str(),
        "device_type": format!("{:?}", i.device_type),
        "vendor": format!("{:#06x}", i.vendor),
        "device": format!("{:#06x}", i.device),
        "driver": i.driver,
        "driver_info": i.driver_info,
        "limits": {
            "max_storage_buffer_binding_size": l.max_storage_buffer_binding_size,
            "max_buffer_size": l.max_buffer_size,
            "max_storage_buffers_per_shader_stage": l.max_storage_buffers_per_shader_stage,
            "max_compute_workgroup_size_x": l.max_compute_workgroup_size_x,
            "max_compute_workgroup_size_y": l.max_compute_workgroup_size_y,
            "max_compute_invocations_per_workgroup": l.max_compute_invocations_per_workgroup,
            "max_compute_workgroup_storage_size": l.max_compute_workgroup_storage_size,
            "max_compute_workgroups_per_dimension": l.max_compute_workgroups_per_dimension,
        },
        "subgroup_min_size": i.subgroup_min_size,
        "subgroup_max_size": i.subgroup_max_size,
        "subgroups": f.contains(wgpu::Features::SUBGROUP),
        "shader_f16": f.contains(wgpu::Features::SHADER_F16),
        "features": f.iter_names().map(|(n, _)| n).collect::<Vec<_>>(),
        "cooperative_matrices": adapter
            .cooperative_matrix_properties()
            .iter()
            .map(|c| {
                format!(
                    "{}x{}x{} {:?}->{:?}",
                    c.m_size, c.n_size, c.k_size, c.ab_type, c.cr_type
                )
            })
            .collect::<Vec<_>>(),
    })
}

/// The same facts as indented lines.
pub fn text(d: &Value) -> String {
    let mut s = String::new();
    let get = |k: &str| d[k].as_str().unwrap_or("").to_string();
    s += &format!(
        "{} ({}, {})\n",
        get("name"),
        get("backend"),
        get("device_type")
    );
    s += &format!(
        "  driver: {} {}\n  vendor {} device {}\n",
        get("driver"),
        get("driver_info"),
        get("vendor"),
        get("device")
    );
    if let Some(limits) = d["limits"].as_object() {
        for (k, v) in limits {
            s += &format!("  {k}: {v}\n");
        }
    }
    s += &format!(
        "  subgroup size: {}..={}\n  subgroups: {}, shader_f16: {}\n",
        d["subgroup_min_size"], d["subgroup_max_size"], d["subgroups"], d["shader_f16"]
    );
    let features: Vec<_> = d["features"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    s += &format!("  features: {}\n", features.join(" "));
    let coop: Vec<_> = d["cooperative_matrices"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    if !coop.is_empty() {
        s += &format!(
            "  cooperative matrices (M x N x K, A and B -> C): {}\n",
            coop.join(", ")
        );
    }
    s
}
