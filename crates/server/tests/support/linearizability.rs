//! A linearizability checker for histories of one object (one KV key, one
//! semaphore): the Wing-Gong search with Lowe's memoization, as Porcupine
//! does it.
//!
//! Every operation has an invocation and a response instant. The search
//! walks the events in time order and tries to linearize, one at a time,
//! operations whose invocation it has passed; an operation may be taken only
//! if the sequential model accepts its recorded result from the current
//! state. Meeting the response of an operation not yet taken means the last
//! choice was wrong, so the search backtracks. A (set of taken operations,
//! model state) pair that was explored once never needs exploring again,
//! which keeps the search small for the few concurrent clients of a test.
#![allow(dead_code)]

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::Instant;

/// A sequential specification: which results an operation may answer from
/// a state, and the state after it.
pub trait Model {
    type State: Clone + Eq + Hash + Debug;
    type Input: Debug;
    type Output: Debug;

    fn init(&self) -> Self::State;

    /// The state after `input` answered `output` from `state`, or `None`
    /// when the model cannot answer that.
    fn step(&self, state: &Self::State, input: &Self::Input, output: &Self::Output) -> Option<Self::State>;
}

/// One completed operation as a client saw it.
#[derive(Debug, Clone)]
pub struct Operation<I, O> {
    pub client: usize,
    pub call: Instant,
    pub ret: Instant,
    pub input: I,
    pub output: O,
}

/// Most search steps before giving up, so a pathological history fails the
/// test instead of hanging it.
const STEPS_MAX: u64 = 20_000_000;
const NIL: usize = usize::MAX;

/// The time-ordered events as a doubly linked list that operations can be
/// lifted out of (once linearized) and put back (on backtracking). Node 0 is
/// the head; node `1 + i` is event `i`.
struct Events {
    next: Vec<usize>,
    prev: Vec<usize>,
    /// The operation of each node, and whether the node is its response.
    op: Vec<(usize, bool)>,
    /// The response node of each operation.
    ret_node: Vec<usize>,
}

impl Events {
    fn new<I, O>(history: &[Operation<I, O>]) -> Events {
        // At equal instants invocations come first: operations that touch
        // count as concurrent, which never rejects a valid history.
        let mut ev: Vec<(Instant, bool, usize)> =
            history.iter().enumerate().flat_map(|(i, o)| [(o.call, false, i), (o.ret, true, i)]).collect();
        ev.sort();
        let n = ev.len();
        let mut e = Events {
            next: (0..=n).map(|k| if k == n { NIL } else { k + 1 }).collect(),
            prev: (0..=n).map(|k| k.wrapping_sub(1)).collect(),
            op: std::iter::once((NIL, false)).chain(ev.iter().map(|&(_, r, i)| (i, r))).collect(),
            ret_node: vec![0; history.len()],
        };
        for (k, &(_, is_ret, i)) in ev.iter().enumerate() {
            if is_ret {
                e.ret_node[i] = k + 1;
            }
        }
        e
    }

    fn unlink(&mut self, node: usize) {
        let (p, n) = (self.prev[node], self.next[node]);
        self.next[p] = n;
        if n != NIL {
            self.prev[n] = p;
        }
    }

    fn relink(&mut self, node: usize) {
        let (p, n) = (self.prev[node], self.next[node]);
        self.next[p] = node;
        if n != NIL {
            self.prev[n] = node;
        }
    }

    /// Takes an invocation and its response out of the list.
    fn lift(&mut self, call: usize) {
        let ret = self.ret_node[self.op[call].0];
        self.unlink(call);
        self.unlink(ret);
    }

    /// Puts them back, in the reverse order of `lift`.
    fn unlift(&mut self, call: usize) {
        let ret = self.ret_node[self.op[call].0];
        self.relink(ret);
        self.relink(call);
    }
}

/// `Ok` when some order of the operations, consistent with real time
/// (an operation that returned before another was invoked comes first), is
/// accepted by the model; else a description of the history.
pub fn check<M: Model>(model: &M, history: &[Operation<M::Input, M::Output>]) -> Result<(), String> {
    let mut events = Events::new(history);
    let words = history.len().div_ceil(64);
    let mut taken = vec![0u64; words];
    let mut seen: HashSet<(Vec<u64>, M::State)> = HashSet::new();
    let mut stack: Vec<(usize, M::State)> = Vec::new();
    let mut state = model.init();
    let mut node = events.next[0];
    let mut deepest = 0;
    let mut steps = 0u64;
    while events.next[0] != NIL {
        steps += 1;
        if steps > STEPS_MAX {
            return Err(format!("the search took more than {STEPS_MAX} steps\n{}", describe(history)));
        }
        let (i, is_ret) = events.op[node];
        if !is_ret {
            if let Some(after) = model.step(&state, &history[i].input, &history[i].output) {
                let mut with = taken.clone();
                with[i / 64] |= 1 << (i % 64);
                if seen.insert((with.clone(), after.clone())) {
                    stack.push((node, std::mem::replace(&mut state, after)));
                    taken = with;
                    events.lift(node);
                    deepest = deepest.max(stack.len());
                    node = events.next[0];
                    continue;
                }
            }
            node = events.next[node];
        } else {
            // An operation returned before it could be placed: undo the last
            // choice and try the next candidate after it.
            let Some((call, before)) = stack.pop() else {
                return Err(format!(
                    "not linearizable (at most {deepest} of {} operations could be ordered)\n{}",
                    history.len(),
                    describe(history)
                ));
            };
            let j = events.op[call].0;
            taken[j / 64] &= !(1 << (j % 64));
            state = before;
            events.unlift(call);
            node = events.next[call];
        }
    }
    Ok(())
}

/// The history by invocation time, in ms from the first invocation.
pub fn describe<I: Debug, O: Debug>(history: &[Operation<I, O>]) -> String {
    let Some(t0) = history.iter().map(|o| o.call).min() else {
        return String::from("(empty history)");
    };
    let mut ops: Vec<&Operation<I, O>> = history.iter().collect();
    ops.sort_by_key(|o| o.call);
    let ms = |t: Instant| t.duration_since(t0).as_secs_f64() * 1e3;
    ops.iter()
        .map(|o| {
            format!(
                "  [{:9.3} .. {:9.3}] client {:2}: {:?} -> {:?}\n",
                ms(o.call),
                ms(o.ret),
                o.client,
                o.input,
                o.output
            )
        })
        .collect()
}
