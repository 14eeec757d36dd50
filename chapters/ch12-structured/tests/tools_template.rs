//! A chat template that renders tools gets them: Qwen2.5's, on its vocabulary, through the
//! sandbox child (this binary), as chapter 12's server renders a request with `tools`.

use ch01_tensors::models;
use ch09_generate::chat::sandbox::Sandbox;
use ch09_generate::chat::{Chat, ChatTemplate, Message};
use ch11_server::structure::{Shape, Structurer};
use ch12_structured::api::Structured;

#[test]
fn qwens_template_renders_the_tools_and_the_call_is_still_steered() {
    let vocab = models::require(&models::llamacpp_vocab("qwen2")).unwrap_or_else(|e| panic!("{e}"));
    let path = models::llamacpp_dir().join("templates/Qwen-Qwen2.5-7B-Instruct.jinja");
    let source =
        std::fs::read_to_string(models::require(&path).unwrap_or_else(|e| panic!("{e}"))).unwrap();
    let file = ch08_gguf::GgufFile::open(&vocab).unwrap();
    let tok = ch08_gguf::tokenizer(&file.gguf).unwrap();
    let sandbox = Sandbox::program(env!("CARGO_BIN_EXE_ch12-structured"));
    let chat =
        Chat::with_template(&file.gguf, &tok, ChatTemplate::Jinja(source), Some(sandbox)).unwrap();
    assert!(chat.takes_tools(), "Qwen2.5's template reads `tools`");

    let body = r#"{"messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tool_choice": "required", "tools": [{"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}]}"#;
    let structured = Structured::new(&tok);
    let plan = structured
        .plan(body, true)
        .unwrap()
        .expect("tools make a plan");
    assert!(
        plan.steer.is_some(),
        "a required call is decoded under a grammar"
    );
    assert!(
        matches!(&plan.shape, Shape::ToolCall { names, required: true } if names == &["get_weather"])
    );
    let tools = plan.tools.expect("the template is given the tools");
    let ids = chat
        .prompt_ids_with_tools(
            &tok,
            &[Message::new("user", "Weather in Paris?")],
            Some(&tools),
        )
        .unwrap();
    let text = tok.tokenizer.decode(&ids).unwrap();
    assert!(
        text.contains("<tools>") && text.contains("\"name\": \"get_weather\""),
        "the template lists the tool in its own words:\n{text}"
    );
    // Without tools the same template writes no tool section.
    let plain = chat
        .prompt_ids(&tok, &[Message::new("user", "Weather in Paris?")])
        .unwrap();
    assert!(!tok.tokenizer.decode(&plain).unwrap().contains("<tools>"));

    // A template that does not take tools: they are listed in the system turn instead.
    let plan = structured.plan(body, false).unwrap().unwrap();
    assert!(plan.tools.is_none());
    assert!(plan.system.is_some_and(|s| s.contains("get_weather")));
}
