//! Fuzzes what a remote LLM streams back: the input is fed to the SSE decoder in pieces (the
//! first byte picks the piece size), and every event's data to the chat-chunk reader. No
//! input may panic; the events stay bounded by what came in.
#![no_main]

use duet_models::cascade::{ChunkReader, SseDecoder};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&size, rest)) = data.split_first() else {
        return;
    };
    let (mut sse, mut reader) = (SseDecoder::new(), ChunkReader::new());
    let (mut datas, mut events) = (Vec::new(), Vec::new());
    for piece in rest.chunks(usize::from(size).max(1)) {
        if sse.push(piece, &mut datas).is_err() {
            return;
        }
        for d in datas.drain(..) {
            reader.read(&d, &mut events);
        }
    }
    assert!(events.len() <= rest.len() + 1);
});
