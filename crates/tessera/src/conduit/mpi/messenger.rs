//! Active-message frames between hosts over two-sided MPI, with bounded buffering.
//!
//! Frames travel on a private duplicate of the world communicator, tag 0 for requests and
//! tag 1 for replies; MPI keeps messages with the same source, tag and communicator in
//! order, which gives the per-source order the core relies on.
//!
//! Flow control by credits: a sender may have at most [`CREDITS`] frames of one class
//! outstanding to one destination; the receiver counts the frames whose handlers have
//! run and returns that many credits in a small message (tag 2) every `CREDITS / 2`
//! frames, and when the sender asks. A sender without credits reports the queue full
//! (`Ok(false)`) and the core makes progress and retries, as it does for a full
//! shared-memory ring, so the memory MPI spends on frames a receiver has not taken yet
//! stays bounded (a receiver holds back fewer than `CREDITS / 2`, so a sender never waits
//! for credits that are not coming). Since credits come back only after the handlers ran,
//! a sender holding all its credits knows every frame it sent has been handled
//! ([`Messenger::all_handled`]), which is what the barrier waits for: there the sender
//! asks each destination that owes it credits, with a frame behind the ones it sent in
//! that class (so, in order, behind them all), and the destination answers at once. So a
//! request and its reply are two messages, not four.
//!
//! Every frame starts with a byte that says what it is: counted (takes a credit),
//! uncounted (takes none: [`Messenger::try_send`]), or an ask for credits.
//!
//! Frames arrive in one receive posted ahead for any source and tag (`raw::PostedReceive`:
//! a message is matched as it comes, where a probe would build a request each time it
//! looks), posted again as soon as it has taken one. It serves every tag: a message of
//! another tag than the one asked for is set aside, in order, for the call that asks for
//! its tag. An ask looks at most once, and after any look (whatever it found) the next ask
//! is answered from what was set aside alone, so a wait that polls replies and requests in
//! turn tests MPI once per turn: each test runs MPI's progress engine, which over TCP is
//! a system call. A message that arrives meanwhile is taken on the next turn.
//!
//! At the end of the job ([`Messenger::drain`]) every rank learns how many messages each
//! peer sent it and receives the ones it has not taken yet (late credits, acknowledgements
//! of the final barrier's signals), so nothing is left unmatched when MPI finalises.
//!
//! This module must never call a handler while it holds internal state borrowed:
//! handlers may send (replies) and poll (reply class) re-entrantly.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use mpi::point_to_point::{MatchedReceiveVec, Source};
use mpi::topology::SimpleCommunicator;
use mpi::traits::Communicator;

use super::raw::{serial, PostedReceive, Received, Send};
use crate::conduit::AmClass;
use crate::error::ConduitError;

/// Frames of one class that may be outstanding from one sender to one receiver.
pub(crate) const CREDITS: u32 = 32;
const CREDIT_TAG: i32 = 2;
/// A frame's first byte: takes no credit.
const UNCOUNTED: u8 = 0;
/// A frame's first byte: takes a credit.
const COUNTED: u8 = 1;
/// A frame's first byte: no handler's, the sender asks for the credits owed to it.
const ASK: u8 = 2;

fn tag(class: AmClass) -> i32 {
    class as i32
}

pub(crate) struct Messenger {
    /// The receive posted for the next frame; declared first, so it is withdrawn before
    /// the communicator goes.
    posted: RefCell<PostedReceive>,
    comm: SimpleCommunicator,
    /// Credits left per (destination, class).
    credits: RefCell<Vec<[u32; 2]>>,
    /// Frames delivered per (source, class) since credits were last returned.
    delivered: RefCell<Vec<[u32; 2]>>,
    /// Per (destination, class): a counted frame went there since this rank last asked
    /// for its credits.
    unasked: RefCell<Vec<[bool; 2]>>,
    /// Sends still in flight (their buffers live until MPI is done).
    in_flight: RefCell<Vec<Send>>,
    /// Messages of every tag sent to / received from each rank (for `drain`).
    sent: RefCell<Vec<u64>>,
    received: RefCell<Vec<u64>>,
    /// Messages received while asking for another tag: (source, tag, contents), in the
    /// order they arrived.
    set_aside: RefCell<VecDeque<Received>>,
    /// This wait turn has probed, and no ask has skipped a probe since.
    turn_probed: Cell<bool>,
}

impl Messenger {
    /// Over `comm` (a private duplicate of the world communicator), for frames of up to
    /// `max_frame` bytes of handler data.
    pub(crate) fn new(
        comm: SimpleCommunicator,
        max_frame: usize,
    ) -> Result<Messenger, ConduitError> {
        let ranks = comm.size() as usize;
        // A frame is its marker byte and the handler's data; a credit message two words.
        let posted = PostedReceive::post(&comm, (1 + max_frame).max(8))?;
        Ok(Messenger {
            posted: RefCell::new(posted),
            comm,
            credits: RefCell::new(vec![[CREDITS; 2]; ranks]),
            delivered: RefCell::new(vec![[0; 2]; ranks]),
            unasked: RefCell::new(vec![[false; 2]; ranks]),
            in_flight: RefCell::new(Vec::new()),
            sent: RefCell::new(vec![0; ranks]),
            received: RefCell::new(vec![0; ranks]),
            set_aside: RefCell::new(VecDeque::new()),
            turn_probed: Cell::new(false),
        })
    }

    fn start(&self, dest: usize, tag: i32, buffer: Vec<u8>) -> Result<(), ConduitError> {
        let send = Send::start(&self.comm, dest, tag, buffer)?;
        self.sent.borrow_mut()[dest] += 1;
        let mut in_flight = self.in_flight.borrow_mut();
        in_flight.push(send);
        // Drop the sends that have completed.
        let mut i = 0;
        while i < in_flight.len() {
            if in_flight[i].done()? {
                in_flight.swap_remove(i);
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Receive one message with `tag` if one has arrived: its source and contents. One set
    /// aside earlier comes first; else, unless this wait turn has probed already (then
    /// this ask skips its probe, and the next one probes), one probe: a message of `tag`
    /// is returned, one of another tag set aside for its own ask.
    fn receive(&self, tag: i32) -> Result<Option<(usize, Vec<u8>)>, ConduitError> {
        if let Some(message) = self.take_set_aside(tag) {
            return Ok(Some(message));
        }
        if self.turn_probed.replace(false) {
            return Ok(None);
        }
        // Whatever the look finds, this turn has looked: the next ask takes only what is
        // set aside.
        self.turn_probed.set(true);
        Ok(match self.receive_any()? {
            Some((source, arrived, contents)) if arrived == tag => Some((source, contents)),
            Some(other) => {
                self.set_aside.borrow_mut().push_back(other);
                None
            }
            None => None,
        })
    }

    /// The first message with `tag` set aside earlier, if any.
    fn take_set_aside(&self, tag: i32) -> Option<(usize, Vec<u8>)> {
        let mut set_aside = self.set_aside.borrow_mut();
        let i = set_aside.iter().position(|m| m.1 == tag)?;
        set_aside
            .remove(i)
            .map(|(source, _, contents)| (source, contents))
    }

    /// Receive the first message to have arrived, of any tag: its source, tag and bytes
    /// (the posted receive's, posted again).
    fn receive_any(&self) -> Result<Option<Received>, ConduitError> {
        let got = self.posted.borrow_mut().take()?;
        if let Some((source, _, _)) = &got {
            self.received.borrow_mut()[*source] += 1;
        }
        Ok(got)
    }

    /// End of the job, collective over every rank, after its final barrier (nothing more
    /// is sent): receive and drop every message still owed to this rank, and complete this
    /// rank's own sends, so that no message is left unmatched at `MPI_Finalize`.
    pub(crate) fn drain(&self) {
        use mpi::traits::CommunicatorCollectives;
        // The posted receive first: a message it already holds counts as received.
        if let Ok(Some((source, _, _))) = self.posted.borrow_mut().cancel() {
            self.received.borrow_mut()[source] += 1;
        }
        let sent = self.sent.borrow().clone();
        let mut owed = vec![0u64; sent.len()];
        serial(|| self.comm.all_to_all_into(&sent[..], &mut owed[..]));
        let received = self.received.borrow().clone();
        for (source, (&owed, &got)) in owed.iter().zip(&received).enumerate() {
            for _ in got..owed {
                serial(|| {
                    let (message, status) =
                        self.comm.process_at_rank(source as i32).matched_probe();
                    // Every message is bytes.
                    let _: (Vec<u8>, _) = (message, status).matched_receive_vec();
                });
            }
        }
        self.in_flight.borrow_mut().clear(); // each Send waits for its request on drop
    }

    /// Take the credit messages that have arrived (those set aside, and one look).
    fn absorb_credits(&self) -> Result<(), ConduitError> {
        while let Some((source, returned)) = self.receive(CREDIT_TAG)? {
            if returned.len() == 8 {
                let [class, count]: [u32; 2] = bytemuck::pod_read_unaligned(&returned);
                self.credits.borrow_mut()[source][class as usize & 1] += count;
            }
        }
        Ok(())
    }

    /// Send one frame, or `Ok(false)` when `dest` has no credit left for `class`. An
    /// uncounted frame (`counted` false) takes no credit and returns none, so
    /// [`Messenger::all_handled`] does not wait for it; the frame's first byte says which.
    pub(crate) fn try_send(
        &self,
        dest: usize,
        class: AmClass,
        parts: &[&[u8]],
        counted: bool,
    ) -> Result<bool, ConduitError> {
        if counted {
            if self.credits.borrow()[dest][class as usize] == 0 {
                self.absorb_credits()?;
                if self.credits.borrow()[dest][class as usize] == 0 {
                    return Ok(false);
                }
            }
            self.credits.borrow_mut()[dest][class as usize] -= 1;
            self.unasked.borrow_mut()[dest][class as usize] = true;
        }
        let marker = if counted { COUNTED } else { UNCOUNTED };
        self.send_frame(dest, class, marker, parts)?;
        Ok(true)
    }

    /// One frame: `marker`, then `parts`.
    fn send_frame(
        &self,
        dest: usize,
        class: AmClass,
        marker: u8,
        parts: &[&[u8]],
    ) -> Result<(), ConduitError> {
        let len = 1 + parts.iter().map(|p| p.len()).sum::<usize>();
        let mut frame = Vec::with_capacity(len);
        frame.push(marker);
        for part in parts {
            frame.extend_from_slice(part);
        }
        self.start(dest, tag(class), frame)
    }

    /// Deliver the frames of `class` set aside, and the one a probe finds (unless this wait
    /// turn has probed already); returns how many.
    pub(crate) fn poll(
        &self,
        class: AmClass,
        deliver: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<usize, ConduitError> {
        // Credits are taken where they are needed (a send without credit, `all_handled`),
        // not here: each probe runs MPI's progress engine, and a poll runs on every turn
        // of every wait. Those left unread meanwhile are bounded by the frames this rank
        // may have outstanding.
        // At most one probe (see `receive`): probing again after a frame would cost a round
        // of MPI's progress engine that mostly finds nothing (a barrier's signal arrives
        // alone); the waits call this again, so later frames go on the next turn.
        let mut count = 0;
        while let Some((source, frame)) = self.receive(tag(class))? {
            match frame.split_first() {
                Some((&ASK, _)) => {
                    // Behind every frame of this class the asker sent before it.
                    self.return_credits(source, class)?;
                }
                Some((&marker, frame)) => {
                    deliver(source, frame);
                    count += 1;
                    // Counted once the handler has run: a returned credit says "handled".
                    let due = {
                        let mut delivered = self.delivered.borrow_mut();
                        let d = &mut delivered[source][class as usize];
                        *d += u32::from(marker == COUNTED);
                        *d >= CREDITS / 2
                    };
                    if due {
                        self.return_credits(source, class)?;
                    }
                }
                None => {
                    return Err(ConduitError::Unsupported {
                        conduit: "mpi",
                        what: "deliver an empty active-message frame",
                    })
                }
            }
        }
        Ok(count)
    }

    /// Return the credits of the frames of `class` from `source` handled so far.
    fn return_credits(&self, source: usize, class: AmClass) -> Result<(), ConduitError> {
        let due = std::mem::replace(&mut self.delivered.borrow_mut()[source][class as usize], 0);
        if due > 0 {
            let credit: Vec<u8> = bytemuck::cast_slice(&[class as u32, due]).to_vec();
            self.start(source, CREDIT_TAG, credit)?;
        }
        Ok(())
    }

    /// Whether every frame this rank sent has been handled at its target (all credits are
    /// back). Unless they are, takes the credit messages that have arrived, and asks every
    /// destination that owes credits for frames sent since it was last asked.
    pub(crate) fn all_handled(&self) -> Result<bool, ConduitError> {
        let full = |c: &[u32; 2]| c[0] == CREDITS && c[1] == CREDITS;
        if self.credits.borrow().iter().all(full) {
            return Ok(true); // no probe: nothing is owed
        }
        self.absorb_credits()?;
        let mut all = true;
        for dest in 0..self.credits.borrow().len() {
            for class in [AmClass::Request, AmClass::Reply] {
                let c = class as usize;
                if self.credits.borrow()[dest][c] == CREDITS {
                    continue;
                }
                all = false;
                if std::mem::take(&mut self.unasked.borrow_mut()[dest][c]) {
                    self.send_frame(dest, class, ASK, &[])?;
                }
            }
        }
        Ok(all)
    }
}
