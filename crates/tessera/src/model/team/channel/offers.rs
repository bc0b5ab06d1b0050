//! The receiving side of direct reads (`core::direct`): a member that found an offer in
//! its ring copies the offered data straight from the sender's buffer, whole or split
//! with the sender (`protocol::split`), or leaves it to a sender that pushes it; and
//! when a call fails, it takes back the buffers it left to senders.
//!
//! This module must never write into another member's memory except through the split
//! copy's state words and the destination the receiver itself posted.

use super::*;

impl Channel {
    /// Copy the data of `offer`, which streams member `from` sent to this one at ring
    /// position `position`, into `out` (exactly as long): whole, or, as `sharing` allows,
    /// split with the sender (`protocol::split`: post the destination, read the first
    /// half, then the second unless the sender has claimed it), or left whole to a sender
    /// that pushes (`split::PUSH`), which writes it (unless it has not claimed it within
    /// [`split::PUSH_PATIENCE`]: then this member reads it). `false` while the sender is
    /// still to write its part: call again with the same `out`, which must stay untouched
    /// meanwhile.
    pub(super) fn read_offer(
        &self,
        ctx: &Context,
        from: usize,
        position: u64,
        offer: &Offer,
        out: &mut [u8],
        sharing: Sharing,
    ) -> Result<bool> {
        // The threshold is never below `split::SPLIT_FROM`, so a message split here has a
        // head shorter than itself.
        let bytes = out.len();
        let sender = self.streams.areas[from].rank();
        let read = |range: RemoteRange, out: &mut [u8]| {
            ctx.count(Traffic::CollectiveRead, sender, out.len());
            range.read_into(out)
        };
        let split_from = match sharing {
            Sharing::Never => usize::MAX,
            Sharing::FromThreshold => self.streams.split_from.get(),
            Sharing::Early if self.split() => split::SPLIT_FROM,
            Sharing::Early => usize::MAX,
        };
        if bytes < split_from {
            read(offer.data, out)?;
            return Ok(true);
        }
        let me = self.streams.me;
        let state = self.offer_word(me, from, position, OFFER_STATE);
        let destination = RemoteRange::of_mut(out);
        // The head this member posted, on a call that resumes a posted read.
        let mut head = (offer.head as usize).min(bytes);
        let mut posted_now = false;
        loop {
            let found = ctx.atomic_load(state)?;
            let step = split::receiver_step(found);
            if matches!(
                step,
                ReceiverStep::Claim
                    | ReceiverStep::Wait
                    | ReceiverStep::Finish
                    | ReceiverStep::ReadRest
            ) && !posted_now
                && offer.destination != [destination.pid, destination.addr]
            {
                return Err(CoreError::Internal(format!(
                    "a split direct read from world rank {} was resumed into another buffer than the one posted (an internal error of the team channel)",
                    self.streams.areas[from].rank()
                ))
                .into());
            }
            match step {
                ReceiverStep::ReadWhole => {
                    read(offer.data, out)?;
                    return Ok(true);
                }
                ReceiverStep::Post => {
                    head = split::head_for(found, bytes);
                    let words = self.offer_word(me, from, position, OFFER_DESTINATION);
                    ctx.put(
                        words,
                        &[destination.pid, destination.addr, head as u64],
                        Blocking,
                    )?;
                    ctx.atomic_store(state, split::POSTED)?;
                    posted_now = true;
                    if head == 0 {
                        // The sender writes it all; come back.
                        self.streams.push_posted.borrow_mut()[from] =
                            Some((std::time::Instant::now(), state));
                        return Ok(false);
                    }
                    if let Err(e) = read(offer.data.part(0, head), &mut out[..head]) {
                        self.settle(ctx, state)?;
                        return Err(e);
                    }
                }
                ReceiverStep::Claim => {
                    let pushing = self.streams.push_posted.borrow()[from];
                    if pushing.is_some_and(|(at, _)| at.elapsed() < split::PUSH_PATIENCE) {
                        return Ok(false);
                    }
                    if ctx.atomic_compare_swap(state, split::POSTED, split::RECEIVER_TAKES)?
                        == split::POSTED
                    {
                        self.streams.push_posted.borrow_mut()[from] = None;
                        let rest = offer.data.part(head, bytes - head);
                        read(rest, &mut out[head..])?;
                        return Ok(true);
                    }
                }
                ReceiverStep::ReadRest => {
                    // Claimed by this member when an error withdrew the push.
                    let rest = offer.data.part(head, bytes - head);
                    read(rest, &mut out[head..])?;
                    return Ok(true);
                }
                ReceiverStep::Wait => return Ok(false),
                ReceiverStep::Finish => {
                    self.streams.push_posted.borrow_mut()[from] = None;
                    return Ok(true);
                }
            }
        }
    }

    /// When a call fails with messages left to their senders to push: keep each sender
    /// from writing into a buffer the caller is about to get back (or wait, briefly, until
    /// it has written). A call that later resumes such a read copies the message itself.
    pub(crate) fn withdraw_pushes(&self, ctx: &Context) {
        let posted: Vec<_> = self
            .streams
            .push_posted
            .borrow_mut()
            .iter_mut()
            .filter_map(Option::take)
            .collect();
        for (_, state) in posted {
            let _ = self.settle(ctx, state);
        }
    }

    /// Before an error hands a posted buffer back: keep the sender from writing into it,
    /// or wait (briefly: it is copying half a message) until it has.
    pub(super) fn settle(&self, ctx: &Context, state: GlobalPtr<u64>) -> Result<()> {
        let backoff = crossbeam_utils::Backoff::new();
        let since = std::time::Instant::now();
        while ctx.atomic_compare_swap(state, split::POSTED, split::RECEIVER_TAKES)?
            == split::SENDER_TAKES
            && since.elapsed() < std::time::Duration::from_secs(10)
        {
            backoff.snooze();
        }
        Ok(())
    }
}
