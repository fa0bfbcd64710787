//! Caught panics of user code (a remote function, a CPU sampler) as text.

/// The text of a caught panic: its `&str` or `String` payload, or a placeholder.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn the_payload_text_or_a_placeholder() {
        assert_eq!(panic_message(&"static"), "static");
        assert_eq!(panic_message(&String::from("owned")), "owned");
        assert_eq!(panic_message(&42_u8), "panic with a non-string payload");
    }
}
