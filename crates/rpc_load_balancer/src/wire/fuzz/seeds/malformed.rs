//! Malformed messages: header lengths that do not fit, huge varint lengths, bad bools, enum
//! tags and chars, invalid UTF-8, bad option tags, and tiny inputs.

use super::{framed, raw, version, Seeds, HUGE32, HUGE64};

pub(super) fn add(seeds: &mut Seeds) {
    let version = version();
    // Header lengths that do not fit the message, and a header followed by stray bytes.
    seeds.add(
        "trailer-length-over-body",
        raw(&[0x00, 0xff, 0x00, 0x00, 0x00]),
    );
    seeds.add("trailer-length-max", raw(&[0xff; 4]));
    seeds.add("trailer-length-zero", framed(b"x", &[]));
    seeds.add("trailer-too-short", raw(&[0x01, 0x00]));
    seeds.add(
        "header-stray-bytes",
        framed(
            &[0x01, b'x'],
            &[0x04, b'e', b'c', b'h', b'o', 0x00, 0x01, 0x07, 0x09],
        ),
    );
    // Huge varint lengths where a string, an option or a sequence starts.
    seeds.add(
        "huge-function-length-u32",
        framed(&[], &[&HUGE32[..], b"echo"].concat()),
    );
    seeds.add(
        "huge-function-length-u64",
        framed(&[], &[&HUGE64[..], b"echo"].concat()),
    );
    seeds.add(
        "huge-varint-overlong",
        framed(
            &[],
            &[
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            ],
        ),
    );
    seeds.add(
        "huge-balancer-length",
        framed(&[], &[&[0x04][..], b"echo", &[0x01], &HUGE64].concat()),
    );
    seeds.add(
        "huge-deadline-varint-overlong",
        framed(&[], &[&[0x04][..], b"echo", &[0x00], &[0xff; 11]].concat()),
    );
    let echo_header = [&[0x04][..], b"echo", &[0x00, 0x01, 0x07]].concat();
    seeds.add("huge-echo-argument-length", framed(&HUGE64, &echo_header));
    let record_header = [&[0x06][..], b"record", &[0x00, 0x01, 0x07]].concat();
    seeds.add(
        "huge-record-tags-length",
        // id -1, name None, score 0.0, flag false, then the tags' length
        framed(
            &[&[0x01, 0x00][..], &[0; 8], &[0x00], &HUGE64].concat(),
            &record_header,
        ),
    );
    seeds.add(
        "record-bad-bool",
        framed(
            &[&[0x01, 0x00][..], &[0; 8], &[0x02]].concat(),
            &record_header,
        ),
    );
    seeds.add(
        "record-bad-enum-tag",
        framed(
            &[&[0x01, 0x00][..], &[0; 8], &[0x00, 0x00, 0x09]].concat(),
            &record_header,
        ),
    );
    seeds.add(
        "record-surrogate-char",
        framed(
            &[
                &[0x01, 0x00][..],
                &[0; 8],
                &[0x00, 0x00, 0x02, 0x03, 0xed, 0xa0, 0x80, 0x01],
            ]
            .concat(),
            &record_header,
        ),
    );
    // Invalid UTF-8 in the function name, the balancer name and a string argument.
    for (name, bad) in [
        ("lone-continuation", &[0x80][..]),
        ("truncated-sequence", &[0xc3, 0x28]),
        ("overlong-nul", &[0xc0, 0x80]),
        ("surrogate", &[0xed, 0xa0, 0x80]),
        ("over-max", &[0xf4, 0x90, 0x80, 0x80]),
    ] {
        let len = u8::try_from(bad.len()).unwrap();
        seeds.add(
            &format!("utf8-function-{name}"),
            framed(&[], &[&[len][..], bad, &[0x00, 0x00, 0x00]].concat()),
        );
        seeds.add(
            &format!("utf8-balancer-{name}"),
            framed(
                &[0x01, b'x'],
                &[&[0x04][..], b"echo", &[0x01, len], bad, &[0x00, 0x00]].concat(),
            ),
        );
        seeds.add(
            &format!("utf8-echo-argument-{name}"),
            framed(&[&[len][..], bad].concat(), &echo_header),
        );
    }
    seeds.add(
        "bad-option-tag",
        framed(&[], &[&[0x04][..], b"echo", &[0x02, 0x00, 0x00]].concat()),
    );
    // Tiny inputs.
    seeds.add("empty", Vec::new());
    seeds.add("version-only", version.clone());
    seeds.add("zero", vec![0x00]);
    seeds.add("all-ff", vec![0xff; 16]);
    seeds.add("all-zero", vec![0x00; 16]);
}
