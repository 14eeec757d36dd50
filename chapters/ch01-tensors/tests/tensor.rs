//! Views: every view reads the right elements, shares storage, and refuses to go out of bounds.

use ch01_tensors::tensor::row_major_strides;
use ch01_tensors::{Error, Tensor};

/// A (2, 3, 4) tensor holding 0..24, so element [i, j, k] is 12i + 4j + k.
fn iota_234() -> Tensor {
    Tensor::from_vec((0..24).map(|v| v as f32).collect(), &[2, 3, 4]).unwrap()
}

#[test]
fn from_vec_checks_the_element_count() {
    let err = Tensor::from_vec(vec![1.0; 5], &[2, 3]).unwrap_err();
    assert!(
        matches!(err, Error::Shape(_)),
        "5 values cannot fill a (2, 3) tensor: {err}"
    );
    // 2^32 · 2^32 wraps to 0 in u64 arithmetic: the product must be checked, not wrapped.
    let huge = Tensor::from_vec(vec![], &[1 << 32, 1 << 32]);
    assert!(
        matches!(huge, Err(Error::Shape(_))),
        "an overflowing shape must not pass as empty"
    );
    let t = Tensor::zeros(&[2, 3]);
    assert_eq!(
        (t.shape(), t.strides(), t.numel()),
        (&[2, 3][..], &[3, 1][..], 6)
    );
    assert_eq!(t.to_vec(), vec![0.0; 6]);
}

#[test]
fn row_major_strides_are_products_of_the_later_sizes() {
    assert_eq!(row_major_strides(&[2, 3, 4]), vec![12, 4, 1]);
    assert_eq!(row_major_strides(&[7]), vec![1]);
    assert_eq!(row_major_strides(&[]), Vec::<usize>::new());
}

#[test]
fn get_follows_the_stride_formula() {
    let t = iota_234();
    for i in 0..2 {
        for j in 0..3 {
            for k in 0..4 {
                assert_eq!(t.get(&[i, j, k]), (12 * i + 4 * j + k) as f32);
            }
        }
    }
}

#[test]
fn transpose_swaps_shape_and_strides_without_copying() {
    let t = iota_234();
    let tt = t.transpose(0, 2); // (4, 3, 2)
    assert_eq!(tt.shape(), &[4, 3, 2]);
    assert_eq!(tt.strides(), &[1, 4, 12]);
    assert!(tt.shares_storage(&t) && !tt.is_contiguous() && tt.as_slice().is_none());
    for i in 0..2 {
        for j in 0..3 {
            for k in 0..4 {
                assert_eq!(tt.get(&[k, j, i]), t.get(&[i, j, k]));
            }
        }
    }
    let back = tt.transpose(0, 2);
    assert_eq!((back.shape(), back.strides()), (t.shape(), t.strides()));
    assert_eq!(
        back.to_vec(),
        t.to_vec(),
        "transposing twice gives the original back"
    );
    assert!(back.is_contiguous() && back.shares_storage(&t));
}

#[test]
fn to_vec_of_a_view_is_in_logical_order() {
    let m = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    assert_eq!(
        m.transpose(0, 1).to_vec(),
        vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );
    // A 3-D view that is neither contiguous nor a simple transpose.
    let v = iota_234().transpose(1, 2).narrow(0, 1, 1).unwrap(); // (1, 4, 3)
    let expect: Vec<f32> = (0..4)
        .flat_map(|k| (0..3).map(move |j| (12 + 4 * j + k) as f32))
        .collect();
    assert_eq!(v.to_vec(), expect);
}

#[test]
fn narrow_moves_the_offset_and_shrinks_one_dimension() {
    let t = iota_234();
    let n = t.narrow(1, 1, 2).unwrap(); // (2, 2, 4): rows j = 1, 2
    assert_eq!(n.shape(), &[2, 2, 4]);
    assert_eq!(n.strides(), t.strides(), "narrow keeps the strides");
    assert_eq!(n.offset(), 4, "starting at j = 1 skips one stride of 4");
    assert!(n.shares_storage(&t) && !n.is_contiguous());
    assert_eq!(n.get(&[1, 0, 3]), t.get(&[1, 1, 3]));
    // Narrow of a narrow: offsets add up.
    let nn = n.narrow(2, 2, 2).unwrap(); // k = 2, 3
    assert_eq!(nn.offset(), 4 + 2);
    assert_eq!(
        nn.to_vec(),
        vec![6.0, 7.0, 10.0, 11.0, 18.0, 19.0, 22.0, 23.0]
    );
    // Narrowing dimension 0 of a contiguous tensor stays contiguous.
    let n0 = t.narrow(0, 1, 1).unwrap();
    assert_eq!(n0.as_slice().unwrap(), &t.to_vec()[12..]);
}

#[test]
fn narrow_refuses_out_of_range() {
    let t = iota_234();
    assert!(
        matches!(t.narrow(1, 2, 2), Err(Error::Shape(_))),
        "j = 2..4 is past size 3"
    );
    assert!(
        matches!(t.narrow(3, 0, 1), Err(Error::Shape(_))),
        "there is no dimension 3"
    );
    assert!(
        matches!(t.narrow(1, usize::MAX, 2), Err(Error::Shape(_))),
        "start + len overflows"
    );
    assert_eq!(
        t.narrow(1, 3, 0).unwrap().numel(),
        0,
        "an empty narrow at the end is fine"
    );
}

#[test]
fn row_is_a_view_of_one_row() {
    let m = Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[2, 3]).unwrap();
    let r = m.row(1);
    assert_eq!(
        (r.shape(), r.strides(), r.offset()),
        (&[3][..], &[1][..], 3)
    );
    assert_eq!(r.as_slice().unwrap(), &[3.0, 4.0, 5.0]);
    // A row of the transpose is a column of the original: strided, not contiguous.
    let c = m.transpose(0, 1).row(2);
    assert_eq!((c.shape(), c.strides()), (&[2][..], &[3][..]));
    assert_eq!(c.to_vec(), vec![2.0, 5.0]);
    assert!(c.shares_storage(&m));
}

#[test]
fn reshape_is_a_view_when_contiguous_and_a_copy_otherwise() {
    let t = iota_234();
    let r = t.reshape(&[6, 4]).unwrap();
    assert!(
        r.shares_storage(&t),
        "reshaping a contiguous tensor must not copy"
    );
    assert_eq!((r.shape(), r.strides()), (&[6, 4][..], &[4, 1][..]));
    assert_eq!(r.to_vec(), t.to_vec());

    let tr = t.transpose(1, 2); // (2, 4, 3), not contiguous
    let flat = tr.reshape(&[24]).unwrap();
    assert!(
        !flat.shares_storage(&t),
        "a transposed view cannot be re-strided, so it is copied"
    );
    assert_eq!(
        flat.to_vec(),
        tr.to_vec(),
        "the copy keeps the view's logical order"
    );

    assert!(
        matches!(t.reshape(&[5, 5]), Err(Error::Shape(_))),
        "24 elements are not 25"
    );
}

#[test]
fn contiguous_copies_only_when_needed() {
    let t = iota_234();
    assert!(t.contiguous().shares_storage(&t));
    let c = t.transpose(0, 1).contiguous();
    assert!(!c.shares_storage(&t) && c.is_contiguous());
    assert_eq!(c.to_vec(), t.transpose(0, 1).to_vec());
    assert_eq!(c.strides(), &row_major_strides(c.shape())[..]);
}

#[test]
fn size_one_dimensions_do_not_break_contiguity() {
    let t = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[1, 3]).unwrap();
    let tt = t.transpose(0, 1); // (3, 1) with strides (1, 3): still one dense run
    assert!(tt.is_contiguous());
    assert_eq!(tt.as_slice().unwrap(), &[1.0, 2.0, 3.0]);
}

#[test]
fn as_strided_checks_bounds() {
    let t = Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[6]).unwrap();
    // Stride 0 repeats an element: a (3, 2) view of [2, 3] repeated three times.
    let rep = t.as_strided(&[3, 2], &[0, 1], 2).unwrap();
    assert_eq!(rep.to_vec(), vec![2.0, 3.0, 2.0, 3.0, 2.0, 3.0]);
    assert!(
        matches!(t.as_strided(&[2, 3], &[3, 1], 1), Err(Error::Shape(_))),
        "last element at 6"
    );
    assert!(
        matches!(t.as_strided(&[2], &[usize::MAX], 0), Err(Error::Shape(_))),
        "overflow"
    );
    assert!(
        matches!(t.as_strided(&[2], &[1, 1], 0), Err(Error::Shape(_))),
        "rank mismatch"
    );
    assert_eq!(
        t.as_strided(&[0, 5], &[100, 100], 100).unwrap().numel(),
        0,
        "empty views read nothing"
    );
}

#[test]
fn empty_and_scalar_tensors() {
    let e = Tensor::zeros(&[0, 3]);
    assert_eq!((e.numel(), e.to_vec()), (0, vec![]));
    assert_eq!(e.as_slice(), Some(&[][..]));
    let s = Tensor::from_vec(vec![7.0], &[]).unwrap();
    assert_eq!((s.numel(), s.get(&[]), s.to_vec()), (1, 7.0, vec![7.0]));
}

#[test]
fn tensor_matmul_checks_shapes_and_accepts_views() {
    let a = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let b = Tensor::from_vec(vec![7.0, 8.0, 9.0, 10.0, 11.0, 12.0], &[3, 2]).unwrap();
    // [1 2 3; 4 5 6] · [7 8; 9 10; 11 12] = [58 64; 139 154], by hand.
    let c = a.matmul(&b).unwrap();
    assert_eq!(
        (c.shape(), c.to_vec()),
        (&[2, 2][..], vec![58.0, 64.0, 139.0, 154.0])
    );
    // aᵀ as a view (3, 2) times a (2, 3): the view is copied to row-major first.
    let ata = a.transpose(0, 1).matmul(&a).unwrap();
    assert_eq!(
        ata.to_vec(),
        vec![17.0, 22.0, 27.0, 22.0, 29.0, 36.0, 27.0, 36.0, 45.0]
    );
    assert!(
        matches!(a.matmul(&a), Err(Error::Shape(_))),
        "(2, 3) · (2, 3) has mismatched inner dims"
    );
    assert!(
        matches!(a.row(0).matmul(&b), Err(Error::Shape(_))),
        "a 1-D tensor is not a matrix"
    );
}

#[test]
fn display_prints_nested_rows() {
    let m = Tensor::from_vec(vec![0.0, 1.5, 2.0, 3.0], &[2, 2]).unwrap();
    assert_eq!(m.to_string(), "[[0, 1.5],\n [2, 3]]");
    assert_eq!(format!("{:.2}", m.row(0)), "[0.00, 1.50]");
}
