#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| regina_server::http::fuzz_targets::json_step(data));
