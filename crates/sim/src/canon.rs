//! A canonical encoding of a state, for comparing replicas byte for byte.
//!
//! `State::encode` is bincode, which writes a `HashMap` in its iteration
//! order, and that order depends on each map's random hasher keys: two
//! replicas holding equal states encode to different bytes. This encoder
//! writes everything as bincode would, except that the entries of every map
//! are sorted by their encoded key, so equal states give equal bytes.

use std::fmt;

use serde::ser::{self, Serialize};

/// Canonical bytes of `value`.
pub fn canonical<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut c = Canon { out: Vec::new() };
    value.serialize(&mut c).expect("a state always encodes");
    c.out
}

/// FNV-1a over 64 bits: stable across runs and builds, unlike std's hasher.
pub fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

#[derive(Debug)]
pub struct CanonError(String);

impl fmt::Display for CanonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CanonError {}

impl ser::Error for CanonError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        CanonError(msg.to_string())
    }
}

struct Canon {
    out: Vec<u8>,
}

/// A sequence whose length is written once known.
pub struct Seq<'a> {
    c: &'a mut Canon,
    len_at: usize,
    count: u64,
}

/// A map whose entries are sorted before they are written.
pub struct Map<'a> {
    c: &'a mut Canon,
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    key: Option<Vec<u8>>,
}

type R = Result<(), CanonError>;

impl<'a> ser::Serializer for &'a mut Canon {
    type Ok = ();
    type Error = CanonError;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = &'a mut Canon;
    type SerializeTupleStruct = &'a mut Canon;
    type SerializeTupleVariant = &'a mut Canon;
    type SerializeMap = Map<'a>;
    type SerializeStruct = &'a mut Canon;
    type SerializeStructVariant = &'a mut Canon;

    fn serialize_bool(self, v: bool) -> R {
        self.out.push(u8::from(v));
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> R {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i16(self, v: i16) -> R {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i32(self, v: i32) -> R {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i64(self, v: i64) -> R {
        self.out.extend_from_slice(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> R {
        self.out.extend_from_slice(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> R {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u16(self, v: u16) -> R {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u32(self, v: u32) -> R {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u64(self, v: u64) -> R {
        self.out.extend_from_slice(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> R {
        self.out.extend_from_slice(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> R {
        self.serialize_u64(u64::from(v.to_bits()))
    }
    fn serialize_f64(self, v: f64) -> R {
        self.serialize_u64(v.to_bits())
    }
    fn serialize_char(self, v: char) -> R {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_str(self, v: &str) -> R {
        self.serialize_bytes(v.as_bytes())
    }
    fn serialize_bytes(self, v: &[u8]) -> R {
        self.serialize_u64(v.len() as u64)?;
        self.out.extend_from_slice(v);
        Ok(())
    }
    fn serialize_none(self) -> R {
        self.out.push(0);
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> R {
        self.out.push(1);
        v.serialize(self)
    }
    fn serialize_unit(self) -> R {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> R {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, index: u32, _: &'static str) -> R {
        self.serialize_u64(u64::from(index))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> R {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        index: u32,
        _: &'static str,
        v: &T,
    ) -> R {
        self.serialize_u64(u64::from(index))?;
        v.serialize(self)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Seq<'a>, CanonError> {
        let len_at = self.out.len();
        self.out.extend_from_slice(&[0u8; 8]);
        Ok(Seq { c: self, len_at, count: 0 })
    }
    fn serialize_tuple(self, _: usize) -> Result<Self, CanonError> {
        Ok(self)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self, CanonError> {
        Ok(self)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        index: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self, CanonError> {
        self.serialize_u64(u64::from(index))?;
        Ok(self)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Map<'a>, CanonError> {
        Ok(Map { c: self, entries: Vec::new(), key: None })
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, CanonError> {
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        index: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self, CanonError> {
        self.serialize_u64(u64::from(index))?;
        Ok(self)
    }
}

impl ser::SerializeSeq for Seq<'_> {
    type Ok = ();
    type Error = CanonError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        self.count += 1;
        v.serialize(&mut *self.c)
    }
    fn end(self) -> R {
        self.c.out[self.len_at..self.len_at + 8].copy_from_slice(&self.count.to_le_bytes());
        Ok(())
    }
}

macro_rules! fields {
    ($trait:ident, $method:ident $(, $name:ty)?) => {
        impl ser::$trait for &mut Canon {
            type Ok = ();
            type Error = CanonError;
            fn $method<T: Serialize + ?Sized>(&mut self, $(_: $name,)? v: &T) -> R {
                v.serialize(&mut **self)
            }
            fn end(self) -> R {
                Ok(())
            }
        }
    };
}

fields!(SerializeTuple, serialize_element);
fields!(SerializeTupleStruct, serialize_field);
fields!(SerializeTupleVariant, serialize_field);
fields!(SerializeStruct, serialize_field, &'static str);
fields!(SerializeStructVariant, serialize_field, &'static str);

impl ser::SerializeMap for Map<'_> {
    type Ok = ();
    type Error = CanonError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> R {
        self.key = Some(canonical(k));
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        let key = self.key.take().ok_or_else(|| CanonError("a map value without its key".into()))?;
        self.entries.push((key, canonical(v)));
        Ok(())
    }
    fn end(mut self) -> R {
        self.entries.sort();
        self.c.out.extend_from_slice(&(self.entries.len() as u64).to_le_bytes());
        for (k, v) in self.entries {
            self.c.out.extend_from_slice(&k);
            self.c.out.extend_from_slice(&v);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use super::*;

    /// Two replicas of one history: equal states, equal canonical bytes,
    /// whatever `State::encode` makes of their hash maps.
    #[test]
    fn replicas_of_one_history_encode_canonically_the_same() {
        use regina_state::command::PushItem;
        use regina_state::{Command, Entry, State};
        let replica = || {
            let mut s = State::new();
            for i in 0..40u64 {
                let item = PushItem {
                    queue: format!("q{}", i % 7),
                    partition: format!("p{}", i % 5),
                    transaction_id: format!("t{i}"),
                    trace_id: None,
                    message_id: [i as u8; 16],
                    payload: b"{}".to_vec(),
                };
                s.apply(&Entry { now_ms: 1_000 + i, command: Command::push(vec![item]) });
            }
            s
        };
        let (a, b) = (replica(), replica());
        assert_eq!(a, b);
        assert_eq!(canonical(&a), canonical(&b));
    }

    /// The job store is part of the digest: replicas that agree on
    /// everything but one job's state do not digest the same.
    #[test]
    fn job_states_are_part_of_the_digest() {
        use regina_state::jobs::apply::{JobResult, JobsOutcome};
        use regina_state::jobs::{Availability, JobOp, JobTarget, JobsCmd, LeaseProof};
        use regina_state::{Command, Entry, Outcome, State};
        let at = JobTarget { queue: "q".into(), scope: "s".into() };
        let call = |s: &mut State, now_ms: u64, ops: Vec<JobOp>| match s
            .apply(&Entry { now_ms, command: Command::Jobs(JobsCmd { ops }) })
            .outcome
        {
            Outcome::Jobs(JobsOutcome::Done(rs)) => rs,
            o => panic!("{o:?}"),
        };
        let replica = |finish: bool| {
            let mut s = State::new();
            let enqueue = |id: &str| JobOp::Enqueue {
                at: at.clone(),
                id: id.into(),
                payload: b"{}".to_vec(),
                when: Availability::Now,
                replace: false,
                required: false,
            };
            call(&mut s, 1_000, vec![enqueue("a"), enqueue("b")]);
            let claim = JobOp::Claim { at: at.clone(), owner: "w".into(), lease_ms: Some(500), request_id: None };
            let JobResult::Claimed(Some(c)) = call(&mut s, 1_000, vec![claim]).remove(0) else { panic!("claimed") };
            let proof = LeaseProof { id: c.id, owner: c.owner, token: c.token };
            let end = match finish {
                true => JobOp::Complete { at: at.clone(), proof, result: b"1".to_vec(), required: false },
                false => JobOp::Release { at: at.clone(), proof, delay_ms: None, required: false },
            };
            call(&mut s, 1_100, vec![end]);
            s
        };
        let (a, b, c) = (replica(true), replica(true), replica(false));
        assert_eq!(canonical(&a), canonical(&b));
        assert_eq!(fnv(&canonical(&a)), fnv(&canonical(&b)));
        assert_ne!(fnv(&canonical(&a)), fnv(&canonical(&c)), "a completed and a released job digest the same");
    }

    #[test]
    fn maps_encode_the_same_whatever_their_order() {
        let a: HashMap<u32, String> = (0..50).map(|i| (i, format!("v{i}"))).collect();
        let b: HashMap<u32, String> = (0..50).rev().map(|i| (i, format!("v{i}"))).collect();
        let c: BTreeMap<u32, String> = (0..50).map(|i| (i, format!("v{i}"))).collect();
        assert_eq!(canonical(&a), canonical(&b));
        assert_eq!(canonical(&a), canonical(&c));
        let mut d = a.clone();
        d.insert(7, "changed".into());
        assert_ne!(canonical(&a), canonical(&d));
    }
}
