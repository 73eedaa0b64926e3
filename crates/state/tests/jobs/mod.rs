//! Shared by the job-queue tests: the reference model and the ledger of
//! fencing tokens seen in answers.
#![allow(dead_code)]

pub mod ledger;
pub mod model;
