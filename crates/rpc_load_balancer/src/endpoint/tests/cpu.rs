//! CPU readings answered on control requests, and their test faults.

use super::*;

/// A node named `name@127.0.0.1` whose CPU readings are `readings` (in place of the
/// process's cache, which the node gives a started node's serving side).
fn shared_reading(name: &str, config: TransportConfig, readings: CpuReadings) -> Arc<TestNode> {
    let mut transport = transport_named(name, config);
    transport.cpu_readings = readings;
    node_of(transport)
}

/// No CPU reading at all.
const NO_READINGS: CpuReadings = NO_CPU_READINGS;

/// 37.5 % (20 ms old) for the node `cpu-answer@127.0.0.1`, none for any other.
const A_READING: CpuReadings = CpuReadings {
    own: |node| {
        (node == "cpu-answer@127.0.0.1").then_some(CpuReading {
            cpu: 37.5,
            age_ms: 20,
        })
    },
    all: || {
        vec![(
            "cpu-answer@127.0.0.1".to_string(),
            CpuReading {
                cpu: 37.5,
                age_ms: 20,
            },
        )]
    },
};

/// 10 % (fresh) for every node.
const TEN_PERCENT: CpuReadings = CpuReadings {
    own: |_| {
        Some(CpuReading {
            cpu: 10.0,
            age_ms: 0,
        })
    },
    all: Vec::new,
};

#[tokio::test]
async fn cpu_readings_are_answered_without_remote_admin() {
    let config = TransportConfig::default();
    let none = shared_reading("cpu-answer", config.clone(), NO_READINGS);
    assert!(!none.transport.config.remote_admin);
    assert_eq!(
        control_of(&none, &ControlRequest::CpuReading).await,
        Ok(ControlReply::CpuReading(None)),
        "no reading yet"
    );
    let shared = shared_reading("cpu-answer", config, A_READING);
    match control_of(&shared, &ControlRequest::CpuReading).await {
        Ok(ControlReply::CpuReading(Some(reading))) => {
            assert_eq!(reading.cpu, 37.5);
            assert!(reading.age_ms >= 20, "{reading:?}");
        }
        other => panic!("expected a reading, got {other:?}"),
    }
    match control_of(&shared, &ControlRequest::CpuReadings).await {
        Ok(ControlReply::CpuReadings(readings)) => {
            let own = readings
                .iter()
                .find(|(node, _)| *node == shared.transport.name);
            assert_eq!(own.map(|(_, r)| r.cpu), Some(37.5), "{readings:?}");
        }
        other => panic!("expected readings, got {other:?}"),
    }
}

#[tokio::test]
async fn a_garbage_cpu_reply_is_a_codec_error_on_the_caller() {
    let config = TransportConfig {
        cpu_reply_garbage: true,
        ..TransportConfig::default()
    };
    let shared = shared_reading("cpu-garbage", config, TEN_PERCENT);
    match control_of(&shared, &ControlRequest::CpuReading).await {
        Err(crate::Error::Codec { function, message }) => {
            assert_eq!(function, "control");
            assert!(message.contains("does not decode"), "{message}");
        }
        other => panic!("expected a codec error, got {other:?}"),
    }
    // Only the CPU reading is garbled.
    assert!(matches!(
        control_of(&shared, &ControlRequest::Ping).await,
        Ok(ControlReply::Pong { .. })
    ));
    assert!(matches!(
        control_of(&shared, &ControlRequest::CpuReadings).await,
        Ok(ControlReply::CpuReadings(_))
    ));
}

#[tokio::test]
async fn an_error_cpu_reply_is_a_remote_error_on_the_caller() {
    let config = TransportConfig {
        cpu_reply_error: true,
        ..TransportConfig::default()
    };
    let shared = shared_reading("cpu-error", config, TEN_PERCENT);
    match control_of(&shared, &ControlRequest::CpuReading).await {
        Err(crate::Error::Remote {
            function,
            failure,
            message,
            ..
        }) => {
            assert_eq!(function, "control");
            assert_eq!(failure, crate::RemoteFailure::Failed);
            assert_eq!(message, super::CPU_REPLY_ERROR);
        }
        other => panic!("expected a remote error, got {other:?}"),
    }
    // Only the CPU reading fails.
    assert!(matches!(
        control_of(&shared, &ControlRequest::CpuReadings).await,
        Ok(ControlReply::CpuReadings(_))
    ));
}
