use super::child::parse_ready_line;
use super::READY_MARKER;

#[test]
fn the_ready_line_is_found_after_other_text() {
    let line = format!("test child ... {READY_MARKER} name=n1@127.0.0.1 address=127.0.0.1:4");
    assert_eq!(
        parse_ready_line(&line),
        Some(("n1@127.0.0.1".to_string(), "127.0.0.1:4".to_string()))
    );
    assert_eq!(parse_ready_line("running 1 test"), None);
    assert_eq!(parse_ready_line(&format!("{READY_MARKER} name=n1")), None);
}
