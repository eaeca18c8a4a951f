//! The parser names each model server accepts, at the version the catalog pins: a
//! `tool_parser` or `reasoning_parser` the chosen server lacks is refused at `validate`, naming
//! the server and its list, with the closest name. The lists are data read from upstream (and
//! recorded again in `tests/upstream/server-parsers.toml`, which `tests/upstream_checks.rs`
//! holds to these and to the pinned image tags, so a bump that renames a parser fails CI):
//!
//! - vLLM v0.31.0 (`db9527a46873454610df6dbedf79a36d6bf1a7f6`, read from the PyPI wheel of that release):
//!   `vllm/tool_parsers/__init__.py` and `vllm/reasoning/__init__.py`, the tables registered
//!   with `ToolParserManager` / `ReasoningParserManager`. An unknown name stops vLLM at start
//!   (`KeyError: invalid tool call parser`).
//! - OVMS v2026.2 (`9b795c5fad08cc4abf06a8f751b80a5fc5ae1001`, identical in v2026.2.1):
//!   `src/llm/io_processing/output_parser.cpp`. An unknown name starts a server whose every
//!   chat request fails ("Unsupported tool parser").
//!
//! The Gaudi build of vLLM and intel/llm-scaler's were not read; their names are not checked,
//! and neither are an `[agent] image`'s.

/// One server's accepted names.
pub struct Parsers {
    pub server: &'static str,
    pub version: &'static str,
    pub tool: &'static [&'static str],
    pub reasoning: &'static [&'static str],
}

pub const VLLM: Parsers = Parsers {
    server: "vLLM",
    version: "v0.31.0",
    tool: &[
        "apertus",
        "cohere_command3",
        "cohere_command4",
        "deepseek_v3",
        "deepseek_v31",
        "deepseek_v32",
        "deepseek_v4",
        "deepseek_v41",
        "dots",
        "ernie45",
        "functiongemma",
        "gemma4",
        "gigachat3",
        "glm45",
        "glm47",
        "granite",
        "granite-20b-fc",
        "granite4",
        "hermes",
        "hunyuan_a13b",
        "hy_v3",
        "hy_v4",
        "inkling",
        "internlm",
        "jamba",
        "k2_horizon",
        "kimi_k2",
        "kimi_k3",
        "lfm2",
        "ling3",
        "llama3_json",
        "llama4_json",
        "llama4_pythonic",
        "longcat",
        "mimo",
        "minicpm5",
        "minimax_m2",
        "minimax_m3",
        "mistral",
        "muse_glimmer",
        "olmo3",
        "openai",
        "phi4_mini_json",
        "poolside_v1",
        "pythonic",
        "qwen3_coder",
        "qwen3_xml",
        "seed_oss",
        "step3",
        "step3p5",
        "xlam",
    ],
    reasoning: &[
        "cohere_command3",
        "cohere_command4",
        "deepseek_r1",
        "deepseek_v3",
        "deepseek_v4",
        "deepseek_v41",
        "ernie45",
        "gemma4",
        "glm45",
        "glm47",
        "granite",
        "granite_thinking_parser",
        "holo2",
        "hunyuan_a13b",
        "hy_v3",
        "hy_v4",
        "inkling",
        "k2_horizon",
        "kimi_k2",
        "kimi_k3",
        "ling3",
        "mimo",
        "minimax_m2",
        "minimax_m2_append_think",
        "minimax_m3",
        "mistral",
        "muse_glimmer",
        "nemotron_v3",
        "olmo3",
        "openai_gptoss",
        "poolside_v1",
        "qwen3",
        "seed_oss",
        "step3",
        "step3p5",
    ],
};

pub const OVMS: Parsers = Parsers {
    server: "OVMS",
    version: "v2026.2",
    tool: &["devstral", "gemma4", "gptoss", "hermes3", "lfm2", "llama3", "mistral", "phi4", "qwen3coder"],
    reasoning: &["gemma4", "gptoss", "qwen3"],
};
