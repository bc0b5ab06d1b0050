//! The single-address (data-centric) forms, `*_to`, which put straight into every member's
//! destination in the global address space, and the rendezvous forms, `*_from`, which get
//! from a root's source; with their entry and exit synchronisation (UPC's sync modes).
//!
//! This module must never write a destination outside the sync mode's promise.

use super::registry::radix_of;
use super::topology::Knomial;
use super::*;
use crate::protocol::mailbox;
use crate::{Blocking, Nonblocking};

/// How a rooted single-address form moves its data and its signals along its tree.
#[derive(Clone, Copy)]
enum Flow<'d> {
    /// Down the tree, each member forwarding from its destination to its children's
    /// (broadcast); or, where the data fits a message's header line and members wait for
    /// it to land, inside the landing signals themselves ([`Inline`]).
    Forward(Option<Inline<'d>>),
    /// From the root straight to every member; entry signals gather up the tree, landing
    /// signals spread down (scatter).
    FromRoot,
    /// From every member straight to the root; entry spreads down, landing gathers up
    /// (gather).
    ToRoot,
}

/// A broadcast small enough to travel inside its "landed" signals
/// (`protocol::mailbox::INLINE` bytes): each member gets the data with its parent's
/// signal and writes its own destination, so a parent writes one line per child (the
/// signal) instead of two (the child's destination, then the signal into the line the
/// child polls; 4-byte OpenSHMEM broadcasts: docs/PERFORMANCE.md, "OpenSHMEM").
#[derive(Clone, Copy)]
struct Inline<'d> {
    /// The root's data (empty elsewhere).
    data: &'d [u8],
    /// Its length on every member.
    len: usize,
    /// This member's destination.
    mine: GlobalPtr<u8>,
}

/// One member's place in a rooted single-address form's tree: the k-nomial tree of the
/// algorithm's radix (flat: radix n, the root every member's parent) rooted at the root.
pub(super) struct SyncTree {
    pub(super) parent: Option<usize>,
    /// Children (team ranks), the smallest subtree first, each with whether it has
    /// children of its own.
    pub(super) children: Vec<(usize, bool)>,
}

impl SyncTree {
    fn new(alg: Algorithm, n: usize, me: usize, root: usize) -> SyncTree {
        let radix = radix_of(alg, n);
        let tree = Knomial::new(radix, n, (me + n - root) % n);
        SyncTree {
            parent: tree.parent.map(|p| (p + root) % n),
            children: tree
                .children
                .iter()
                .map(|&c| ((c + root) % n, Knomial::has_children(radix, n, c)))
                .collect(),
        }
    }
}

/// The tree of a team's last rooted single-address call, or small broadcast on the
/// channel, by algorithm and root, so that a program's repeated calls (a loop of small
/// broadcasts) build it once.
#[derive(Default)]
pub(super) struct LastTree(RefCell<Option<(Algorithm, usize, Rc<SyncTree>)>>);

impl LastTree {
    pub(super) fn get(&self, alg: Algorithm, n: usize, me: usize, root: usize) -> Rc<SyncTree> {
        let mut last = self.0.borrow_mut();
        match &*last {
            Some((a, r, tree)) if *a == alg && *r == root => tree.clone(),
            _ => {
                let tree = Rc::new(SyncTree::new(alg, n, me, root));
                *last = Some((alg, root, tree.clone()));
                tree
            }
        }
    }
}

/// Which single-address call a member is in (operation, root, element count and size):
/// the signature its "entered" and "landed" signals carry, so that members whose calls
/// differ fail at the first signal, or at the end of the job, naming both calls.
#[derive(Clone, Copy)]
pub(super) struct SingleCall {
    op: Collective,
    root: Option<usize>,
    count: usize,
    elem: usize,
}

impl SingleCall {
    fn new<T>(op: Collective, root: Option<usize>, count: usize) -> SingleCall {
        SingleCall {
            op,
            root,
            count,
            elem: std::mem::size_of::<T>(),
        }
    }
}

impl<'a> Team<'a> {
    /// Start a blocking single-address call: its signals carry `call`; checked mode first
    /// compares every member's call, as it does for the mailbox forms.
    fn begin_single(&self, call: SingleCall) -> Result<CallGuard> {
        let SingleCall {
            op,
            root,
            count,
            elem,
        } = call;
        if self.ctx.checked_mode() {
            return self.check_call(op, root, count, elem, None);
        }
        Ok(self.begin_call(Signature::new(
            op,
            Form::SingleAddress,
            root,
            count,
            elem,
            None,
        )))
    }

    // ----- data-centric (single-address) forms ------------------------------------------

    /// The same segment offset on every member: the destinations of data allocated with
    /// [`Context::alloc_collective`], in team-rank order, for the `*_to` forms.
    pub fn symmetric<T>(&self, ptr: GlobalPtr<T>) -> Vec<GlobalPtr<T>> {
        self.members.iter().map(|&r| ptr.on(r)).collect()
    }

    pub(super) fn check_destinations<T>(
        &self,
        what: &'static str,
        dsts: &[GlobalPtr<T>],
    ) -> Result<()> {
        self.check_places(what, "destination", dsts)
    }

    /// One pointer per member, pointer `i` on member `i` (`role`: what they are, for the
    /// error).
    pub(super) fn check_places<T>(
        &self,
        what: &'static str,
        role: &'static str,
        ptrs: &[GlobalPtr<T>],
    ) -> Result<()> {
        if ptrs.len() != self.size() {
            return Err(CoreError::BadArgument {
                call: what,
                argument: role,
                why: format!(
                    "{what}: the {role} list has {} elements but {} are needed",
                    ptrs.len(),
                    self.size()
                ),
            }
            .into());
        }
        for (i, &d) in ptrs.iter().enumerate() {
            self.check_place(what, role, i, d)?;
        }
        Ok(())
    }

    /// Destination `d` must live on team member `i`.
    pub(super) fn check_destination<T>(
        &self,
        what: &'static str,
        i: usize,
        d: GlobalPtr<T>,
    ) -> Result<()> {
        self.check_place(what, "destination", i, d)
    }

    /// Pointer `d` (a `role`) must live on team member `i`.
    pub(super) fn check_place<T>(
        &self,
        what: &'static str,
        role: &'static str,
        i: usize,
        d: GlobalPtr<T>,
    ) -> Result<()> {
        if d.rank() != self.members[i] {
            return Err(CoreError::BadArgument {
                call: what,
                argument: role,
                why: format!(
                    "{what}: {role} {i} lives on rank {} but team member {i} is rank {}",
                    d.rank(),
                    self.members[i]
                ),
            }
            .into());
        }
        Ok(())
    }

    /// The synchronisation around a single-address form's puts (`put`), by `self.sync`:
    /// `targets` are the members this one puts into, `sources` those that put into it.
    /// Entry `My` and exit `My` are one empty channel message per pair ("entered",
    /// "landed"), in opposite directions, each consumed within the call.
    pub(super) fn deliver(
        &self,
        call: SingleCall,
        targets: impl Iterator<Item = usize> + Clone,
        sources: impl Iterator<Item = usize> + Clone,
        put: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let _call = self.begin_single(call)?;
        match self.sync.input {
            SyncMode::All => self.barrier()?,
            SyncMode::My => self.signals(sources.clone(), targets.clone())?,
            SyncMode::No => {}
        }
        put()?;
        match self.sync.output {
            SyncMode::No => Ok(()),
            SyncMode::My => self.signals(targets, sources),
            SyncMode::All => {
                self.signals(targets, sources)?;
                self.barrier()
            }
        }
    }

    /// One empty channel message to each of `to` and from each of `from` (a single-address
    /// form's "entered" and "landed" signals).
    fn signals(
        &self,
        to: impl IntoIterator<Item = usize>,
        from: impl IntoIterator<Item = usize>,
    ) -> Result<()> {
        self.channel.transfer_each(
            self.ctx,
            to.into_iter().map(|t| Outgoing::new(t, &[])),
            from.into_iter().map(|f| Incoming::new(f, &mut [])),
        )
    }

    /// A blocking rooted single-address form (`call`) along the tree
    /// its algorithm gives ([`SyncTree`]; flat: the root is every member's parent),
    /// between the entry and exit synchronisation of the team's sync modes; while the
    /// team tunes online and entry is [`SyncMode::All`], perhaps a trial of another tree.
    /// `flow` says how the data and the signals move; `put` moves this member's part of
    /// the data: for [`Flow::Forward`] once per child (`Some(child)`), after the data has
    /// landed here, otherwise once (`None`).
    fn rooted_single(
        &self,
        call: SingleCall,
        flow: Flow<'_>,
        mut put: impl FnMut(Option<usize>) -> Result<()>,
    ) -> Result<()> {
        let _call = self.begin_single(call)?;
        let (op, bytes) = (call.op, call.count * call.elem);
        let root = call.root.expect("a rooted form names its root");
        // A trial opens with a barrier: only where entry is one anyway, so that looser
        // modes keep their promise (a member may finish before another enters).
        let may_trial = self.sync.input == SyncMode::All;
        self.chosen(op, bytes, false, may_trial, |alg| {
            self.along_tree(alg, root, flow, &mut put)
        })
    }

    /// The body of [`Team::rooted_single`] with the tree of `alg`.
    fn along_tree(
        &self,
        alg: Algorithm,
        root: usize,
        flow: Flow<'_>,
        put: &mut impl FnMut(Option<usize>) -> Result<()>,
    ) -> Result<()> {
        let tree = self.last_tree.get(alg, self.size(), self.me, root);
        let (input, output) = (self.sync.input, self.sync.output);
        let parent = tree.parent;
        let kids = || tree.children.iter().map(|&(c, _)| c);
        if input == SyncMode::All {
            self.barrier()?;
        }
        // Entry: every destination is written only after its owner has entered.
        if input == SyncMode::My {
            match flow {
                // Each member writes its children's destinations.
                Flow::Forward(_) => self.signals(parent, kids())?,
                // The root writes every member's: entry gathers up the tree.
                Flow::FromRoot => {
                    self.signals([], kids())?;
                    self.signals(parent, [])?;
                }
                // Every member writes the root's: its entry spreads down the tree.
                Flow::ToRoot => {
                    self.signals([], parent)?;
                    self.signals(kids(), [])?;
                }
            }
        }
        let landed = output != SyncMode::No;
        match flow {
            Flow::Forward(Some(inline)) if landed => {
                let mut buf = [0u8; mailbox::INLINE];
                let data = match parent {
                    None => inline.data,
                    Some(p) => {
                        let mut from = [Incoming::new(p, &mut buf[..inline.len])];
                        self.channel.transfer(self.ctx, &mut [], &mut from)?;
                        self.ctx.put(inline.mine, &buf[..inline.len], Blocking)?;
                        &buf[..inline.len]
                    }
                };
                for &(c, _) in tree.children.iter().rev() {
                    self.channel
                        .transfer(self.ctx, &mut [Outgoing::new(c, data)], &mut [])?;
                }
            }
            Flow::Forward(_) => {
                // Wait for the data when it is to be forwarded or waited for.
                if landed || !tree.children.is_empty() {
                    self.signals([], parent)?;
                }
                // The largest subtree first.
                for &(c, inner) in tree.children.iter().rev() {
                    put(Some(c))?;
                    if landed || inner {
                        self.signals([c], [])?;
                    }
                }
            }
            Flow::FromRoot => {
                put(None)?;
                if landed {
                    self.signals([], parent)?;
                    self.signals(kids(), [])?;
                }
            }
            Flow::ToRoot => {
                put(None)?;
                if landed {
                    self.signals([], kids())?;
                    self.signals(parent, [])?;
                }
            }
        }
        if output == SyncMode::All {
            self.barrier()?;
        }
        Ok(())
    }

    /// A nonblocking single-address form: the puts now, the "landed" messages counted by
    /// a handle (they carry the one signature of such messages, as the handle's progress
    /// may send them inside any later call).
    pub(super) fn start_single(
        &self,
        targets: impl Iterator<Item = usize> + Clone,
        sources: impl Iterator<Item = usize> + Clone,
        put: impl FnOnce() -> Result<()>,
    ) -> Result<Option<CollHandle<'a>>> {
        if self.sync.input != SyncMode::No || self.sync.output == SyncMode::All {
            return Err(CoreError::BadArgument { call: "a nonblocking single-address collective", argument: "the team's sync modes", why: format!(
                "nonblocking single-address collectives need entry SyncMode::No and exit No or My (this team has {:?}/{:?}); use Team::with_sync(SyncMode::No, SyncMode::My) and make sure the destinations are ready before anyone enters",
                self.sync.input, self.sync.output
            ) }
            .into());
        }
        if !self.schedules.borrow().pending.is_empty() {
            return Err(CoreError::OutOfOrder { call: "a nonblocking single-address collective", why: "nonblocking mailbox collectives (a `Nonblocking` run of an operation without `.to_symmetric`) are in flight on this team: wait for them before starting a nonblocking single-address one".into() }
            .into());
        }
        put()?;
        let mut need = Vec::new();
        if self.sync.output == SyncMode::My {
            let mut nb_state = self.nb.borrow_mut();
            for t in targets {
                nb_state.unsent[t] += 1;
            }
            for s in sources {
                nb_state.expected[s] += 1;
                need.push((s, nb_state.expected[s]));
            }
        }
        self.channel.begin_nonblocking();
        let mut handle = CollHandle {
            team: self.clone(),
            need,
            open: true,
        };
        handle.test()?;
        Ok(Some(handle))
    }

    /// Advance every nonblocking collective of this team without waiting: send the
    /// "landed" messages that fit, count the ones that arrived.
    pub(super) fn progress_nonblocking(&self) -> Result<()> {
        let mut st = self.nb.borrow_mut();
        for t in 0..self.size() {
            while st.unsent[t] > 0
                && self
                    .channel
                    .try_send_chunk(self.ctx, t, &[], Signature::SINGLE_ADDRESS)?
            {
                st.unsent[t] -= 1;
            }
            while st.received[t] < st.expected[t]
                && self
                    .channel
                    .try_recv_chunk(self.ctx, t, &mut [], Signature::SINGLE_ADDRESS)?
                    .is_some()
            {
                st.received[t] += 1;
            }
        }
        Ok(())
    }

    pub(super) fn broadcast_to_op<T: Pod>(
        &self,
        nb: bool,
        root: usize,
        src: &[T],
        dsts: &[GlobalPtr<T>],
        len: usize,
    ) -> Result<Option<CollHandle<'a>>> {
        self.check_root(root)?;
        self.check_destinations("broadcast_to", dsts)?;
        if self.me == root && src.len() != len {
            return Err(length_error("broadcast_to", "src", src.len(), len));
        }
        if nb {
            return self.root_puts_nb(root, dsts, |_| src);
        }
        let me = self.me;
        // Its own (entered by definition), unless in place.
        if me == root && self.ctx.local_ptr(dsts[root], len)? != Some(src.as_ptr().cast_mut()) {
            self.ctx.put(dsts[root], src, Blocking)?;
        }
        let bytes = len * std::mem::size_of::<T>();
        let inline = (bytes > 0 && bytes <= mailbox::INLINE).then(|| Inline {
            data: if me == root {
                bytemuck::cast_slice(src)
            } else {
                &[]
            },
            len: bytes,
            mine: dsts[me].cast(),
        });
        self.rooted_single(
            SingleCall::new::<T>(Collective::BroadcastTo, Some(root), len),
            Flow::Forward(inline),
            |child| {
                let c = child.expect("a forwarding put names its child");
                if me == root {
                    self.ctx.put(dsts[c], src, Blocking)
                } else {
                    self.ctx.copy_strided(dsts[c], &[1], dsts[me], &[1], &[len])
                }
            },
        )
        .map(|()| None)
    }

    /// Nonblocking and flat: the root puts `block(i)` into every member `i`'s
    /// destination; the others receive.
    fn root_puts_nb<'s, T: Pod>(
        &self,
        root: usize,
        dsts: &[GlobalPtr<T>],
        block: impl Fn(usize) -> &'s [T],
    ) -> Result<Option<CollHandle<'a>>> {
        let (n, me) = (self.size(), self.me);
        self.start_single(
            (0..n).filter(|&i| me == root && i != root),
            std::iter::once(root).filter(|_| me != root),
            || {
                if me == root {
                    for (i, d) in dsts.iter().enumerate() {
                        self.ctx.put(*d, block(i), Blocking)?;
                    }
                }
                Ok(())
            },
        )
    }

    /// Rendezvous broadcast: every member *gets* the data from `src`, which lives on `root`
    /// (in its segment; every member passes the same pointer), into its own `dst` (a local
    /// buffer; every member passes the same length). The receivers move the data, each
    /// once the root has entered, and nothing passes through the team's mailboxes. The
    /// team's synchronisation modes ([`Team::with_sync`]) apply with source and
    /// destination swapped: entry `My` means the root's `src` is read only after the root
    /// has entered, exit `My` that the root returns once every member has finished
    /// reading it (so it may then change it) and every member once its `dst` is filled.
    pub(super) fn broadcast_from<T: Pod>(
        &self,
        root: usize,
        src: GlobalPtr<T>,
        dst: &mut [T],
    ) -> Result<()> {
        self.check_root(root)?;
        self.check_place("broadcast_from", "source", root, src)?;
        let (n, me) = (self.size(), self.me);
        // Members read from the root; the root is read by all the others.
        self.deliver(
            SingleCall::new::<T>(Collective::Broadcast, Some(root), dst.len()),
            std::iter::once(root).filter(|_| me != root),
            (0..n).filter(|&i| me == root && i != root),
            || self.ctx.get(src, dst, Blocking),
        )
    }

    /// Rendezvous gather: `root` *gets* block `i` of `dst` (`dst.len() / size` elements) from
    /// member `i`'s `srcs[i]` (in that member's segment) once member `i` has entered. Every
    /// member passes the same `srcs` (see [`Team::symmetric`]); `dst` is written on the root
    /// only (others may pass an empty one). The synchronisation modes apply as for
    /// [`Team::broadcast_from`]: with exit `My` a member returns once the root has read its
    /// block.
    pub(super) fn gather_from<T: Pod>(
        &self,
        root: usize,
        srcs: &[GlobalPtr<T>],
        dst: &mut [T],
    ) -> Result<()> {
        self.check_root(root)?;
        self.check_places("gather_from", "source", srcs)?;
        let (n, me) = (self.size(), self.me);
        let len = if me == root {
            self.block_of("gather_from", dst.len())?
        } else {
            0
        };
        // Only the root knows the block length.
        self.deliver(
            SingleCall::new::<()>(Collective::Gather, Some(root), 0),
            (0..n).filter(|&i| me == root && i != root),
            std::iter::once(root).filter(|_| me != root),
            || {
                if me != root {
                    return Ok(());
                }
                // All the gets in flight at once (each completes as issued on shared
                // memory), starting with the next member's block.
                let mut blocks: Vec<(usize, &mut [T])> =
                    dst.chunks_mut(len.max(1)).enumerate().collect();
                blocks.rotate_left((me + 1) % n);
                let handles = blocks
                    .into_iter()
                    .map(|(i, block)| self.ctx.get(srcs[i], block, Nonblocking))
                    .collect::<Result<Vec<_>>>()?;
                handles.into_iter().try_for_each(|h| h.wait())
            },
        )
    }

    pub(super) fn exchange_to_op<T: Pod>(
        &self,
        nb: bool,
        src: &[T],
        dsts: &[GlobalPtr<T>],
    ) -> Result<Option<CollHandle<'a>>> {
        self.check_destinations("exchange_to", dsts)?;
        let b = self.block_of("exchange_to", src.len())?;
        self.all_put(nb, Collective::Exchange, dsts, b, |j| {
            &src[j * b..(j + 1) * b]
        })
    }

    /// Every member puts `block(j)` into member `j`'s destination at block position (its
    /// team rank × `len`).
    pub(super) fn all_put<'s, T: Pod>(
        &self,
        nb: bool,
        op: Collective,
        dsts: &[GlobalPtr<T>],
        len: usize,
        block: impl Fn(usize) -> &'s [T],
    ) -> Result<Option<CollHandle<'a>>> {
        let (n, me) = (self.size(), self.me);
        let others = (0..n).filter(move |&i| i != me);
        let put = || {
            // Start with the next member so that members do not all write to the same one.
            for s in 0..n {
                let j = (me + s) % n;
                self.ctx.put(dsts[j].add(me * len), block(j), Blocking)?;
            }
            Ok(())
        };
        if nb {
            return self.start_single(others.clone(), others, put);
        }
        let call = SingleCall::new::<T>(op, None, len);
        self.deliver(call, others.clone(), others, put)
            .map(|()| None)
    }

    pub(super) fn gather_to_op<T: Pod>(
        &self,
        nb: bool,
        root: usize,
        src: &[T],
        dst: GlobalPtr<T>,
    ) -> Result<Option<CollHandle<'a>>> {
        self.check_root(root)?;
        self.check_destination("gather_to", root, dst)?;
        let (n, me) = (self.size(), self.me);
        let put = || self.ctx.put(dst.add(me * src.len()), src, Blocking);
        if nb {
            return self.start_single(
                std::iter::once(root).filter(|_| me != root),
                (0..n).filter(|&i| me == root && i != root),
                put,
            );
        }
        let call = SingleCall::new::<T>(Collective::GatherTo, Some(root), src.len());
        self.rooted_single(call, Flow::ToRoot, |_| put())
            .map(|()| None)
    }

    pub(super) fn scatter_to_op<T: Pod>(
        &self,
        nb: bool,
        root: usize,
        src: &[T],
        dsts: &[GlobalPtr<T>],
        len: usize,
    ) -> Result<Option<CollHandle<'a>>> {
        self.check_root(root)?;
        self.check_destinations("scatter_to", dsts)?;
        let n = self.size();
        if self.me == root && src.len() != n * len {
            return Err(length_error("scatter_to", "src", src.len(), n * len));
        }
        let block = |i: usize| &src[i * len..(i + 1) * len];
        if nb {
            return self.root_puts_nb(root, dsts, block);
        }
        let call = SingleCall::new::<T>(Collective::ScatterTo, Some(root), len);
        let me = self.me;
        self.rooted_single(call, Flow::FromRoot, |_| {
            if me == root {
                // Starting with the next member, as the flat form does.
                for s in 0..n {
                    let i = (root + 1 + s) % n;
                    self.ctx.put(dsts[i], block(i), Blocking)?;
                }
            }
            Ok(())
        })
        .map(|()| None)
    }

    pub(super) fn allgather_to_op<T: Pod>(
        &self,
        nb: bool,
        src: &[T],
        dsts: &[GlobalPtr<T>],
    ) -> Result<Option<CollHandle<'a>>> {
        self.check_destinations("allgather_to", dsts)?;
        self.all_put(nb, Collective::Allgather, dsts, src.len(), |_| src)
    }
}
