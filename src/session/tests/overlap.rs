//! Speech over an answer judged on its own ([`Overlap`]): by its length, by its first words
//! while it goes on, and by its words once it ended, on the session's clock.

use std::sync::Arc;
use std::time::Instant;

use super::super::interrupt::{Overlap, Verdict, EARLY_WORDS_MS, WORDS_TIMEOUT};

#[test]
fn decisive_first_words_interrupt_before_the_minimum() {
    let t0 = Instant::now();
    let mut o = Overlap::new(1_000, 8_200, 14_400);
    let at_400ms = 8_200 + 400 * 24;
    assert!(o.wants_early_words(at_400ms));
    assert!(
        !o.wants_early_words(8_200 + (EARLY_WORDS_MS - 20) * 24),
        "under EARLY_WORDS_MS"
    );
    o.early = Some(Arc::from("bc_early"));
    assert!(!o.wants_early_words(at_400ms), "asked once");
    assert!(!o.owns("bc_other"), "not its own");
    assert!(o.owns("bc_early"));
    o.heard("bc_early", "I".into());
    assert_eq!(
        o.verdict(at_400ms, true, t0, true),
        None,
        "\"I\" may be \"I see\""
    );
    o.heard("bc_early", "Stop,".into());
    assert_eq!(
        o.verdict(at_400ms, true, t0, true),
        Some(Verdict::Interrupt {
            onset: 1_000,
            stopped_at: None
        })
    );
}

#[test]
fn voice_before_a_pause_counts_towards_the_early_words() {
    // espeak-ng's Scottish "Wait, … what did you say?": "Wait," (20 ms short of
    // EARLY_WORDS_MS), a pause the turn model ends it at, then "what": the first word was
    // said, so the words so far are asked as soon as EARLY_WORDS_MS of voice were heard in
    // all, not EARLY_WORDS_MS after "what" began.
    let ms = |ms: u64| ms * 24;
    let before = EARLY_WORDS_MS - 20;
    let mut o = Overlap::new(ms(200), ms(300), ms(600));
    o.stopped_at = Some(ms(300 + before));
    o.resume(ms(500 + before));
    assert!(
        !o.wants_early_words(ms(510 + before)),
        "10 ms short of it in all"
    );
    assert!(
        o.wants_early_words(ms(520 + before)),
        "the voice before the pause and 20 ms since"
    );
    assert_eq!(
        o.voiced_ms(ms(520 + before)),
        20,
        "the length counts from the voice's return"
    );
}

#[test]
fn decisive_words_before_a_pause_interrupt_when_they_come_after_it() {
    let t0 = Instant::now();
    let ms = |ms: u64| ms * 24;
    for (first, interrupts) in [("Wait...", true), ("Mm-hmm.", false), ("I", false)] {
        // "Wait," then a pause that ends the speech: its words are asked, and the voice
        // comes back ("what did you say") before they are heard.
        let mut o = Overlap::new(ms(200), ms(300), ms(600));
        o.stopped_at = Some(ms(630));
        o.words = Some((Arc::from("bc_pause"), t0 + WORDS_TIMEOUT));
        o.resume(ms(830));
        assert!(o.owns("bc_pause"), "still its own");
        assert_eq!(o.verdict(ms(900), true, t0, true), None, "{first}");
        o.heard("bc_pause", first.into());
        let verdict = o.verdict(ms(900), true, t0, true);
        let want = interrupts.then_some(Verdict::Interrupt {
            onset: ms(200),
            stopped_at: None,
        });
        assert_eq!(verdict, want, "{first}");
    }
    // Heard before the voice came back, they count the same.
    let mut o = Overlap::new(ms(200), ms(300), ms(600));
    o.stopped_at = Some(ms(630));
    o.words = Some((Arc::from("bc_pause"), t0 + WORDS_TIMEOUT));
    o.heard("bc_pause", "Stop.".into());
    o.resume(ms(830));
    assert_eq!(
        o.verdict(ms(900), true, t0, true),
        Some(Verdict::Interrupt {
            onset: ms(200),
            stopped_at: None
        })
    );
    assert_eq!(o.reported(), Some("Stop."));
}

#[test]
fn long_speech_interrupts_and_short_speech_waits_for_its_words() {
    let t0 = Instant::now();
    let mut o = Overlap::new(1_000, 8_200, 14_400);
    assert_eq!(o.verdict(20_000, true, t0, true), None, "under 600 ms");
    assert_eq!(
        o.verdict(22_600, true, t0, true),
        Some(Verdict::Interrupt {
            onset: 1_000,
            stopped_at: None
        })
    );
    assert_eq!(
        o.verdict(9_000, true, t0, false),
        Some(Verdict::Interrupt {
            onset: 1_000,
            stopped_at: None
        }),
        "the answer is over: the user's turn"
    );
    // Ended short, words asked: wait for them, then judge by them.
    o.stopped_at = Some(18_000);
    o.words = Some((Arc::from("bc_1"), t0 + WORDS_TIMEOUT));
    assert_eq!(o.verdict(20_000, false, t0, true), None);
    assert_eq!(o.deadline(), Some(t0 + WORDS_TIMEOUT));
    o.heard = Some("Mm-hmm.".into());
    assert_eq!(
        o.verdict(20_000, false, t0, true),
        Some(Verdict::Backchannel { until: 18_000 })
    );
    assert_eq!(o.deadline(), None);
    o.heard = Some("Stop.".into());
    assert_eq!(
        o.verdict(20_000, false, t0, true),
        Some(Verdict::Interrupt {
            onset: 1_000,
            stopped_at: Some(18_000)
        })
    );
    // Words that never come: no interruption.
    o.heard = None;
    assert_eq!(
        o.verdict(20_000, false, t0 + WORDS_TIMEOUT, true),
        Some(Verdict::Backchannel { until: 18_000 })
    );
    // No transcriber: a short utterance is no interruption.
    o.words = None;
    assert_eq!(
        o.verdict(20_000, false, t0, true),
        Some(Verdict::Backchannel { until: 18_000 })
    );
}

/// A transcriber answer for `id` with `text` and its tokens' log probabilities.
fn answer(id: &str, tokens: &[(&str, f32)]) -> super::super::TranscriptEvent {
    let text: String = tokens.iter().map(|(t, _)| *t).collect();
    let logprobs = tokens
        .iter()
        .map(|(t, lp)| duet_models::TokenLogprob {
            token: t.to_string(),
            logprob: *lp,
            bytes: t.as_bytes().to_vec(),
        })
        .collect();
    super::super::TranscriptEvent {
        item_id: Arc::from(id),
        output: Ok(duet_models::TranscribeOutput::Completed {
            text: text.trim().to_string(),
            logprobs,
            audio_seconds: 0.5,
            language: None,
        }),
    }
}

#[test]
fn words_the_transcriber_is_unsure_of_do_not_interrupt() {
    let t0 = Instant::now();
    let mut o = Overlap::new(1_000, 8_200, 14_400);
    o.stopped_at = Some(18_000);
    o.words = Some((Arc::from("bc_1"), t0 + WORDS_TIMEOUT));
    // Whisper tiny.en's "A-c" for espeak-ng's fast "I see." (its word tokens average -2.07).
    assert!(o.hear(&answer(
        "bc_1",
        &[(" A", -2.39), ("-", -1.55), ("c", -1.74)]
    )));
    assert_eq!(o.heard.as_deref(), Some(""), "unsure words are no words");
    assert_eq!(
        o.verdict(20_000, false, t0, true),
        Some(Verdict::Backchannel { until: 18_000 }),
        "a short utterance without words it is sure of is no interruption"
    );
    // Sure words decide, punctuation aside ("Wait, wait": -1.36 over its words).
    let wait = [(" Wait", -1.79), (",", -1.22), (" wait", -0.92)];
    assert!(o.hear(&answer("bc_1", &wait)));
    assert_eq!(o.heard.as_deref(), Some("Wait, wait"));
    assert_eq!(
        o.verdict(20_000, false, t0, true),
        Some(Verdict::Interrupt {
            onset: 1_000,
            stopped_at: Some(18_000)
        })
    );
    // A transcriber that reports no log probabilities is taken at its word.
    let mut stop = answer("bc_1", &[]);
    if let Ok(duet_models::TranscribeOutput::Completed { text, .. }) = &mut stop.output {
        *text = "Stop".into();
    }
    assert!(o.hear(&stop));
    assert_eq!(o.heard.as_deref(), Some("Stop"));
    assert!(
        !o.hear(&answer("bc_other", &[(" Stop", 0.0)])),
        "not its own"
    );
}

#[test]
fn a_sound_the_transcriber_spells_in_pieces_does_not_interrupt() {
    let t0 = Instant::now();
    let mut o = Overlap::new(1_000, 8_200, 14_400);
    o.stopped_at = Some(18_000);
    o.words = Some((Arc::from("bc_1"), t0 + WORDS_TIMEOUT));
    // Whisper tiny.en's "Bum-bum" for a hummed "mm-hmm" in espeak-ng's RP voice: its word
    // tokens average -1.33, sure enough to count as words, and they are no word.
    let bum = [
        (" B", -2.78),
        ("um", -0.95),
        ("-", -1.62),
        ("b", -1.42),
        ("um", -0.15),
    ];
    assert!(o.hear(&answer("bc_1", &bum)));
    assert_eq!(o.heard.as_deref(), Some(""), "pieces are no words");
    assert_eq!(
        o.verdict(20_000, false, t0, true),
        Some(Verdict::Backchannel { until: 18_000 })
    );
    // Early words spelled in pieces decide nothing either.
    let mut going = Overlap::new(1_000, 8_200, 14_400);
    going.early = Some(Arc::from("bc_early"));
    assert!(going.hear(&answer("bc_early", &bum)));
    assert_eq!(going.verdict(17_000, true, t0, true), None);
    // A word among them decides.
    assert!(going.hear(&answer("bc_early", &[(" Stop", -0.2), (",", -0.4)])));
    assert_eq!(
        going.verdict(17_000, true, t0, true),
        Some(Verdict::Interrupt {
            onset: 1_000,
            stopped_at: None
        })
    );
}
