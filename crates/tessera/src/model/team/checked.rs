//! Entering a collective call: argument checks and the call signature every team message
//! carries, so that members in different calls are caught at the first message (checked
//! mode compares the signatures of every member).
//!
//! This module must never move user data; it only checks and agrees.

use super::*;

impl<'a> Team<'a> {
    /// Start a blocking call: every message it sends carries `call` (the outermost call's,
    /// if this one is nested inside another collective of the team), until the guard is
    /// dropped. Inlined, with [`Team::check_call`] and [`Team::enter_rooted`], into every
    /// collective, so that the guard is built where the call keeps it rather than returned
    /// through memory (the three out of line cost 10–15 ns of a 0.13 µs 8-byte scatter at 2
    /// ranks on a Zen 2).
    #[inline(always)]
    pub(super) fn begin_call(&self, call: Signature) -> CallGuard {
        let guard = self.channel.enter_call(call);
        if self.ctx.counts_communication() {
            guard.counted(self.ctx.stats_scope(true))
        } else {
            guard
        }
    }

    /// Start a blocking collective: record its signature for its messages, and in checked
    /// mode make sure every member called the same collective with matching arguments,
    /// naming the members that differ (one ring exchange of a descriptor). Runs before any
    /// local validation, so a member with a bad argument cannot leave the others waiting.
    #[inline(always)]
    pub(super) fn check_call(
        &self,
        op: Collective,
        root: Option<usize>,
        count: usize,
        elem: usize,
        reduction: Option<Op>,
    ) -> Result<CallGuard> {
        let guard = self.begin_call(Signature::new(
            op,
            Form::Blocking,
            root,
            count,
            elem,
            reduction.map(SigReduction::Builtin),
        ));
        if self.ctx.checked_mode() && self.size() > 1 {
            self.agree_on_call(signature(op, root, count, elem, reduction))?;
        }
        Ok(guard)
    }

    /// Checked mode's comparison of every member's call, `mine` this member's descriptor
    /// (see [`Team::check_call`]).
    #[cold]
    #[inline(never)]
    fn agree_on_call(&self, mine: [u64; 5]) -> Result<()> {
        let n = self.size();
        let mut all = vec![0u64; 5 * n];
        all[5 * self.me..5 * self.me + 5].copy_from_slice(&mine);
        let (right, left) = ((self.me + 1) % n, (self.me + n - 1) % n);
        let call = self.channel.call();
        self.channel.set_call(Signature::AGREEMENT);
        for s in 0..n - 1 {
            let out = (self.me + n - s) % n;
            let inb = (self.me + 2 * n - s - 1) % n;
            let moved = self.sendrecv_within(
                right,
                left,
                &mut all,
                5 * out..5 * out + 5,
                5 * inb..5 * inb + 5,
            );
            if moved.is_err() {
                self.channel.set_call(call);
                moved?;
            }
        }
        self.channel.set_call(call);
        agree(&self.members, &all)
    }

    /// Start a blocking collective with a user reduction (no checked-mode agreement: the
    /// operation cannot be compared).
    pub(super) fn begin_user<T>(
        &self,
        op: Collective,
        root: Option<usize>,
        count: usize,
    ) -> CallGuard {
        self.begin_call(Signature::new(
            op,
            Form::Blocking,
            root,
            count,
            std::mem::size_of::<T>(),
            Some(SigReduction::User),
        ))
    }

    /// In checked mode, start the agreement check of a nonblocking call: a ring allgather
    /// of every member's call, as a schedule ahead of the call's own, whose last step
    /// fails every later `test` or `wait` on this team with the calls named if they differ.
    /// Before any local check of the arguments, so that every member's call goes out.
    pub(super) fn check_nb<T>(
        &self,
        op: Collective,
        root: Option<usize>,
        count: usize,
        reduction: Option<Op>,
    ) -> Result<()> {
        self.channel.set_call(Signature::new(
            op,
            Form::Nonblocking,
            root,
            count,
            std::mem::size_of::<T>(),
            reduction.map(SigReduction::Builtin),
        ));
        if !self.ctx.checked_mode() || self.size() == 1 {
            return Ok(());
        }
        let mine = signature(op, root, count, std::mem::size_of::<T>(), reduction);
        let (n, me) = (self.size(), self.me);
        let members = self.members.clone();
        let verify = Box::new(move |all: &[u64]| agree(&members, all));
        let mut st = self.schedules.borrow_mut();
        self.reserve_from_channel(&mut st)?;
        let mut schedule = schedule::Schedule::new(
            &mut st.reserved,
            schedule::Input::Owned(mine.to_vec()),
            schedule::Output::Owned(vec![0u64; mine.len() * n]),
            None,
            Signature::AGREEMENT,
        );
        schedule.build(&mut st.reserved, self.channel.chunk(), false, |b| {
            let call = Call::new(Algorithm::RING, n, me, mine.len());
            algorithms::rounds(Collective::Allgather, b, call)
        });
        drop(st);
        self.enqueue::<u64>(Box::new(Checked::new(schedule, verify)))
            .map(|request| request.detach())
    }

    /// The start of a rooted operation without a reduction: checked-mode agreement, then a
    /// valid root.
    #[inline(always)]
    pub(super) fn enter_rooted<T>(
        &self,
        op: Collective,
        root: usize,
        count: usize,
    ) -> Result<CallGuard> {
        let guard = self.check_call(op, Some(root), count, std::mem::size_of::<T>(), None)?;
        self.check_root(root)?;
        Ok(guard)
    }

    /// The start of an operation with a built-in reduction: checked-mode agreement, then
    /// refuse an operation that does not apply to the type (before anything moves).
    #[inline]
    pub(super) fn enter_reduction<T: Reducible>(
        &self,
        op: Collective,
        root: Option<usize>,
        count: usize,
        reduction: Op,
    ) -> Result<CallGuard> {
        let guard = self.check_call(op, root, count, std::mem::size_of::<T>(), Some(reduction))?;
        check_op::<T>(reduction)?;
        Ok(guard)
    }

    /// Send `buf[out]` to `to` while receiving `buf[inb]` from `from`, straight from and
    /// into the buffer (the ranges are disjoint; no copy of the outgoing block).
    pub(super) fn sendrecv_within<T: Pod>(
        &self,
        to: usize,
        from: usize,
        buf: &mut [T],
        out: std::ops::Range<usize>,
        inb: std::ops::Range<usize>,
    ) -> Result<()> {
        let (send, recv) = if out.end <= inb.start {
            let (lo, hi) = buf.split_at_mut(inb.start);
            (&lo[out], &mut hi[..inb.len()])
        } else {
            debug_assert!(inb.end <= out.start, "overlapping ring blocks");
            let (lo, hi) = buf.split_at_mut(out.start);
            (&hi[..out.len()], &mut lo[inb])
        };
        self.sendrecv(to, send, from, recv)
    }

    /// The block each member gets of an all-to-all source of `len` elements, or an error
    /// naming `what` when `len` is not a multiple of the team size.
    pub(super) fn block_of(&self, what: &'static str, len: usize) -> Result<usize> {
        let n = self.size();
        if !len.is_multiple_of(n) {
            return Err(CoreError::BadArgument {
                call: what,
                argument: "src",
                why: format!("{what}: src has {len} elements, not a multiple of the team size {n}"),
            }
            .into());
        }
        Ok(len / n)
    }

    #[inline]
    pub(super) fn check_root(&self, root: usize) -> Result<()> {
        if root >= self.size() {
            return Err(not_a_member(root, self.size()));
        }
        Ok(())
    }
}

/// A collective call as checked mode compares it: the operation, root, count, element
/// size and reduction, as words.
pub(super) fn signature(
    op: Collective,
    root: Option<usize>,
    count: usize,
    elem: usize,
    reduction: Option<Op>,
) -> [u64; 5] {
    [
        op.index() as u64,
        root.map_or(u64::MAX, |r| r as u64),
        count as u64,
        elem as u64,
        reduction.map_or(u64::MAX, |r| {
            ALL_OPS.iter().position(|&o| o == r).unwrap_or(0) as u64
        }),
    ]
}

/// Whether every member's [`signature`] (five words each, in team order, in `all`) is the
/// same; if not, an error naming each member's world rank and call.
pub(super) fn agree(members: &[usize], all: &[u64]) -> Result<()> {
    let n = members.len();
    if (0..n).all(|i| all[5 * i..5 * i + 5] == all[..5]) {
        return Ok(());
    }
    let describe = |d: &[u64]| -> String {
        let name = Collective::ALL.get(d[0] as usize).map_or("?", |c| c.name());
        let root = if d[1] == u64::MAX {
            String::new()
        } else {
            format!("root {}, ", d[1])
        };
        let red = ALL_OPS
            .get(d[4] as usize)
            .map_or(String::new(), |o| format!(", {o:?}"));
        format!("{name}({root}{} elements of {} bytes{red})", d[2], d[3])
    };
    let calls: Vec<String> = (0..n)
        .map(|i| format!("rank {}: {}", members[i], describe(&all[5 * i..5 * i + 5])))
        .collect();
    Err(CoreError::ArgumentsDiffer {
        calls: format!(
            "collective arguments differ between ranks (checked mode): {}",
            calls.join("; ")
        ),
    }
    .into())
}

/// The error of a root that is not a member of a team of `n`.
#[cold]
fn not_a_member(root: usize, n: usize) -> crate::Error {
    CoreError::BadArgument {
        call: "a rooted collective",
        argument: "root",
        why: format!("root {root} is not a member: this team has ranks 0..{n}"),
    }
    .into()
}
