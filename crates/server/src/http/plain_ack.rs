//! The plain reader of an ack body, one ack (`POST /api/v1/ack`) or a batch
//! (`POST /api/v1/ack/batch`), in the shape every client sends: strings
//! without escapes for the ids, the status and the group. serde's reading of
//! a batch of acks was a fifth of a consumed message's instructions
//! (docs/benchmarks.md, item 19).
//!
//! It declines (and the route reads the body with serde) whatever it is not
//! sure of: an escape in any field it keeps, a repeated field, a partition
//! id that is not a string, a missing id. A property test holds it to
//! reading every body it accepts as serde does (`ack::plain_reader_agrees`).

use crate::http::plain_json::{document, Reader};

/// One ack as the body holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlainAck<'a> {
    pub transaction_id: &'a str,
    pub partition_id: &'a str,
    pub status: Option<&'a str>,
    pub error: Option<&'a str>,
    pub consumer_group: Option<&'a str>,
    pub lease_id: Option<&'a str>,
}

/// A batch: its acks and the group they name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlainBatch<'a> {
    pub acks: Vec<PlainAck<'a>>,
    pub consumer_group: Option<&'a str>,
}

/// A batch ack body, or `None` when the reader declines it.
pub(crate) fn batch(body: &[u8]) -> Option<PlainBatch<'_>> {
    let (mut acks, mut group) = (None, None);
    document(body, |r, key| match key {
        "acknowledgments" if acks.is_none() => {
            acks = Some(r.array(|r| {
                let mut fields = Fields::default();
                r.object(|r, key| fields.member(r, key))?;
                fields.finish()
            })?);
            Some(())
        }
        "consumerGroup" if group.is_none() => {
            group = Some(r.string_or_null()?);
            Some(())
        }
        "acknowledgments" | "consumerGroup" => None,
        _ => r.value(1),
    })?;
    Some(PlainBatch { acks: acks?, consumer_group: group.flatten() })
}

/// A single ack body, or `None` when the reader declines it.
pub(crate) fn one(body: &[u8]) -> Option<PlainAck<'_>> {
    let mut fields = Fields::default();
    document(body, |r, key| fields.member(r, key))?;
    fields.finish()
}

/// The fields of one ack as they are read; a second sight of one declines.
#[derive(Default)]
pub(crate) struct Fields<'a> {
    transaction_id: Option<&'a str>,
    partition_id: Option<&'a str>,
    status: Option<Option<&'a str>>,
    error: Option<Option<&'a str>>,
    consumer_group: Option<Option<&'a str>>,
    lease_id: Option<Option<&'a str>>,
}

impl<'a> Fields<'a> {
    pub(crate) fn member(&mut self, r: &mut Reader<'a>, key: &str) -> Option<()> {
        let (required, optional) = match key {
            "transactionId" => (Some(&mut self.transaction_id), None),
            "partitionId" => (Some(&mut self.partition_id), None),
            "status" => (None, Some(&mut self.status)),
            "error" => (None, Some(&mut self.error)),
            "consumerGroup" => (None, Some(&mut self.consumer_group)),
            "leaseId" => (None, Some(&mut self.lease_id)),
            // serde skips a field it does not know.
            _ => return r.value(2),
        };
        match (required, optional) {
            (Some(slot), _) if slot.is_none() => *slot = Some(r.plain_string()?),
            (_, Some(slot)) if slot.is_none() => *slot = Some(r.string_or_null()?),
            _ => return None,
        }
        Some(())
    }

    pub(crate) fn finish(self) -> Option<PlainAck<'a>> {
        Some(PlainAck {
            transaction_id: self.transaction_id?,
            partition_id: self.partition_id?,
            status: self.status.flatten(),
            error: self.error.flatten(),
            consumer_group: self.consumer_group.flatten(),
            lease_id: self.lease_id.flatten(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::plain_push::tests::{damage, object_of, SPACE, VALUES};
    use crate::http::routes::ack::plain_reader_agrees;

    #[test]
    fn reads_what_clients_send() {
        let body = br#"{"acknowledgments":[{"transactionId":"t1","partitionId":"42","status":"completed","leaseId":"l","error":null},{"partitionId":"7","transactionId":"t2","extra":[1,{"a":"\n"}]}],"consumerGroup":"g"}"#;
        let b = batch(body).expect("plain");
        assert_eq!(b.consumer_group, Some("g"));
        assert_eq!(b.acks.len(), 2);
        assert_eq!(
            b.acks[0],
            PlainAck {
                transaction_id: "t1",
                partition_id: "42",
                status: Some("completed"),
                error: None,
                consumer_group: None,
                lease_id: Some("l")
            }
        );
        assert_eq!((b.acks[1].transaction_id, b.acks[1].partition_id, b.acks[1].status), ("t2", "7", None));
        assert!(plain_reader_agrees(body));
        let single = br#" {"transactionId":"t","partitionId":"1","consumerGroup":null} "#;
        assert_eq!(one(single).map(|a| (a.transaction_id, a.consumer_group)), Some(("t", None)));
        assert!(plain_reader_agrees(single));
    }

    #[test]
    fn declines_what_it_is_not_sure_of() {
        for body in [
            &br#"{"acknowledgments":[{"transactionId":"t\u0031","partitionId":"1"}]}"#[..],
            br#"{"acknowledgments":[{"transactionId":"t","partitionId":1}]}"#,
            br#"{"acknowledgments":[{"transactionId":"t"}]}"#,
            br#"{"acknowledgments":[{"transactionId":"t","partitionId":"1","status":"a","status":"b"}]}"#,
            br#"{"acknowledgments":[],"acknowledgments":[]}"#,
            br#"{"consumerGroup":"g"}"#,
            br#"{"acknowledgments":[{"transactionId":"t","partitionId":"1"}]"#,
            b"",
        ] {
            assert_eq!(batch(body), None, "{}", String::from_utf8_lossy(body));
            assert!(plain_reader_agrees(body));
        }
    }

    const KEYS: &[&str] = &[
        "transactionId",
        "partitionId",
        "status",
        "error",
        "consumerGroup",
        "leaseId",
        "other",
        "acknowledgments",
        "transacti\\u006fnId",
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// Whatever the plain reader reads, serde reads the same way.
        #[test]
        fn agrees_with_serde(
            acks in proptest::collection::vec(
                proptest::collection::vec((0usize..KEYS.len(), 0usize..VALUES.len()), 0..7), 0..4),
            usual in proptest::collection::vec(0usize..VALUES.len(), 0..3),
            space in 0usize..SPACE.len(),
            group in proptest::option::of(0usize..VALUES.len()),
            cut in proptest::option::of((0usize..400, 0u8..128)),
        ) {
            let ws = SPACE[space % SPACE.len()];
            // Acks of the usual shape (ids as strings) beside generated ones.
            let mut rendered: Vec<String> = usual
                .iter()
                .map(|&v| format!(r#"{{"transactionId":"t{v}","partitionId":"{v}","status":{}}}"#, VALUES[v]))
                .collect();
            rendered.extend(acks.iter().map(|fields| object_of(KEYS, fields, ws)));
            let group = group.map(|v| format!(",{ws}\"consumerGroup\":{ws}{}", VALUES[v])).unwrap_or_default();
            let mut body = format!("{ws}{{\"acknowledgments\":{ws}[{}]{group}}}{ws}", rendered.join(",")).into_bytes();
            let mut single = rendered.first().cloned().unwrap_or_default().into_bytes();
            damage(&mut body, cut);
            damage(&mut single, cut);
            proptest::prop_assert!(plain_reader_agrees(&body), "disagree on {}", String::from_utf8_lossy(&body));
            proptest::prop_assert!(plain_reader_agrees(&single), "disagree on {}", String::from_utf8_lossy(&single));
        }
    }
}
