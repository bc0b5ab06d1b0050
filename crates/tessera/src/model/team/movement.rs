//! The blocking data-movement collectives: barrier, broadcast, gather, allgather, scatter,
//! exchange (all-to-all) and its variable form, each in the algorithms the registry lists.
//!
//! This module must never touch another rank's memory except through the channel.

use super::*;

impl<'a> Team<'a> {
    // ----- barrier ----------------------------------------------------------------------

    /// Block until every member has entered the barrier.
    pub fn barrier(&self) -> Result<()> {
        let _call = self.check_call(Collective::Barrier, None, 0, 0, None)?;
        let n = self.size();
        match self.choose(Collective::Barrier, 0, true) {
            Algorithm::Native => self.native(NativeOp::Barrier, &[], &mut []),
            Algorithm::Flat => {
                if self.me == 0 {
                    let mut bufs: Vec<[u8; 0]> = vec![[]; n];
                    let mut recvs: Vec<Incoming> = bufs
                        .iter_mut()
                        .enumerate()
                        .skip(1)
                        .map(|(i, b)| Incoming::new(i, b))
                        .collect();
                    self.channel.transfer(self.ctx, &mut [], &mut recvs)?;
                    let mut sends: Vec<Outgoing> = (1..n).map(|i| Outgoing::new(i, &[])).collect();
                    self.channel.transfer(self.ctx, &mut sends, &mut [])
                } else {
                    self.channel.send(self.ctx, 0, &[])?;
                    self.channel.recv(self.ctx, 0, &mut [])
                }
            }
            _ => {
                let mut dist = 1;
                while dist < n {
                    self.channel.sendrecv(
                        self.ctx,
                        (self.me + dist) % n,
                        &[],
                        (self.me + n - dist) % n,
                        &mut [],
                    )?;
                    dist *= 2;
                }
                Ok(())
            }
        }
    }

    // ----- broadcast --------------------------------------------------------------------

    /// Copy `data` from member `root` to every member's `data`.
    pub fn broadcast<T: Pod>(&self, root: usize, data: &mut [T]) -> Result<()> {
        let _call = self.enter_rooted::<T>(Collective::Broadcast, root, data.len())?;
        let n = self.size();
        if n == 1 {
            return Ok(());
        }
        match self.choose(Collective::Broadcast, std::mem::size_of_val(data), true) {
            Algorithm::Native => self.native(
                NativeOp::Broadcast { root },
                &[],
                bytemuck::cast_slice_mut(data),
            ),
            Algorithm::Chain => {
                let rel = (self.me + n - root) % n;
                let (prev, next) = ((self.me + n - 1) % n, (self.me + 1) % n);
                let step = (DEFAULT_CHUNK / std::mem::size_of::<T>().max(1)).max(1);
                let mut start = 0;
                loop {
                    let end = (start + step).min(data.len());
                    if rel != 0 {
                        self.recv(prev, &mut data[start..end])?;
                    }
                    if rel != n - 1 {
                        self.send(next, &data[start..end])?;
                    }
                    start = end;
                    if start >= data.len() {
                        return Ok(());
                    }
                }
            }
            alg => {
                let radix = radix_of(alg, n);
                let tree = Knomial::new(radix, n, (self.me + n - root) % n);
                if let Some(parent) = tree.parent {
                    self.recv((parent + root) % n, data)?;
                }
                let children: Vec<usize> = tree.children.iter().map(|c| (c + root) % n).collect();
                let bytes: &[u8] = bytemuck::cast_slice(data);
                let mut sends: Vec<Outgoing> =
                    children.iter().map(|&c| Outgoing::new(c, bytes)).collect();
                self.channel.transfer(self.ctx, &mut sends, &mut [])
            }
        }
    }

    /// Broadcast one value from `root`.
    pub fn broadcast_value<T: Pod>(&self, root: usize, value: T) -> Result<T> {
        let mut v = [value];
        self.broadcast(root, &mut v)?;
        Ok(v[0])
    }

    // ----- gather, allgather, scatter -------------------------------------------------

    /// Gather every member's `src` (all the same length) into `dst` on `root`, in rank order
    /// (`dst.len() == size · src.len()` there; untouched and possibly empty elsewhere).
    pub fn gather<T: Pod>(&self, root: usize, src: &[T], dst: &mut [T]) -> Result<()> {
        let _call = self.enter_rooted::<T>(Collective::Gather, root, src.len())?;
        let n = self.size();
        let b = src.len();
        if self.me == root && dst.len() != n * b {
            return Err(length_error("gather", "dst", dst.len(), n * b));
        }
        match self.choose(Collective::Gather, std::mem::size_of_val(src), true) {
            Algorithm::Native => self.native(
                NativeOp::Gather { root },
                bytemuck::cast_slice(src),
                bytemuck::cast_slice_mut(dst),
            ),
            Algorithm::Flat => {
                if self.me == root {
                    dst[root * b..(root + 1) * b].copy_from_slice(src);
                    let mut recvs: Vec<Incoming> = dst
                        .chunks_mut(b.max(1))
                        .take(n)
                        .enumerate()
                        .filter(|&(i, _)| i != root)
                        .map(|(i, c)| Incoming::new(i, bytemuck::cast_slice_mut(c)))
                        .collect();
                    if b == 0 {
                        recvs = (0..n)
                            .filter(|&i| i != root)
                            .map(|i| Incoming::new(i, &mut []))
                            .collect();
                    }
                    self.channel.transfer(self.ctx, &mut [], &mut recvs)
                } else {
                    self.send(root, src)
                }
            }
            _ => {
                // Binomial: member rel collects the blocks of relative ranks [rel, rel + span).
                let rel = (self.me + n - root) % n;
                let tree = Knomial::new(2, n, rel);
                let span = tree.subtree_end - rel;
                let mut buf = vec![T::zeroed(); span * b];
                buf[..b].copy_from_slice(src);
                for &c in &tree.children {
                    let child_end = Knomial::new(2, n, c).subtree_end;
                    self.recv(
                        (c + root) % n,
                        &mut buf[(c - rel) * b..(child_end - rel) * b],
                    )?;
                }
                match tree.parent {
                    Some(p) => self.send((p + root) % n, &buf),
                    None => {
                        for (j, block) in buf.chunks(b.max(1)).enumerate().take(n) {
                            let abs = (j + root) % n;
                            dst[abs * b..(abs + 1) * b].copy_from_slice(&block[..b]);
                        }
                        Ok(())
                    }
                }
            }
        }
    }

    /// Every member gets every member's `src` in rank order
    /// (`dst.len() == size · src.len()`).
    pub fn allgather<T: Pod>(&self, src: &[T], dst: &mut [T]) -> Result<()> {
        let _call = self.check_call(
            Collective::Allgather,
            None,
            src.len(),
            std::mem::size_of::<T>(),
            None,
        )?;
        let n = self.size();
        let b = src.len();
        if dst.len() != n * b {
            return Err(length_error("allgather", "dst", dst.len(), n * b));
        }
        let me = self.me;
        match self.choose(Collective::Allgather, std::mem::size_of_val(src), true) {
            Algorithm::Native => self.native(
                NativeOp::Allgather,
                bytemuck::cast_slice(src),
                bytemuck::cast_slice_mut(dst),
            ),
            Algorithm::GatherBroadcast => {
                let single = self.with_forced(&[
                    (Collective::Gather, Algorithm::Binomial),
                    (Collective::Broadcast, Algorithm::Binomial),
                ]);
                single.gather(0, src, dst)?;
                single.broadcast(0, dst)
            }
            Algorithm::Bruck => {
                // tmp[j] holds the block of member (me + j) % n.
                let mut tmp = vec![T::zeroed(); n * b];
                tmp[..b].copy_from_slice(src);
                let mut dist = 1;
                while dist < n {
                    let count = dist.min(n - dist);
                    let (have, rest) = tmp.split_at_mut(dist * b);
                    self.sendrecv(
                        (me + n - dist) % n,
                        &have[..count * b],
                        (me + dist) % n,
                        &mut rest[..count * b],
                    )?;
                    dist *= 2;
                }
                for j in 0..n {
                    let abs = (me + j) % n;
                    dst[abs * b..(abs + 1) * b].copy_from_slice(&tmp[j * b..(j + 1) * b]);
                }
                Ok(())
            }
            _ => {
                dst[me * b..(me + 1) * b].copy_from_slice(src);
                let (right, left) = ((me + 1) % n, (me + n - 1) % n);
                for s in 0..n.saturating_sub(1) {
                    let out = (me + n - s) % n;
                    let inb = (me + 2 * n - s - 1) % n;
                    self.sendrecv_within(
                        right,
                        left,
                        dst,
                        out * b..(out + 1) * b,
                        inb * b..(inb + 1) * b,
                    )?;
                }
                Ok(())
            }
        }
    }

    /// Member `root` sends block `i` of `src` (`size · dst.len()` elements) to member `i`.
    pub fn scatter<T: Pod>(&self, root: usize, src: &[T], dst: &mut [T]) -> Result<()> {
        let _call = self.enter_rooted::<T>(Collective::Scatter, root, dst.len())?;
        let n = self.size();
        let b = dst.len();
        if self.me == root && src.len() != n * b {
            return Err(length_error("scatter", "src", src.len(), n * b));
        }
        match self.choose(Collective::Scatter, std::mem::size_of_val(dst), true) {
            Algorithm::Native => self.native(
                NativeOp::Scatter { root },
                bytemuck::cast_slice(src),
                bytemuck::cast_slice_mut(dst),
            ),
            Algorithm::Flat => {
                if self.me == root {
                    dst.copy_from_slice(&src[root * b..(root + 1) * b]);
                    let mut sends: Vec<Outgoing> = (0..n)
                        .filter(|&i| i != root)
                        .map(|i| Outgoing::new(i, bytemuck::cast_slice(&src[i * b..(i + 1) * b])))
                        .collect();
                    self.channel.transfer(self.ctx, &mut sends, &mut [])
                } else {
                    self.recv(root, dst)
                }
            }
            _ => {
                let rel = (self.me + n - root) % n;
                let tree = Knomial::new(2, n, rel);
                let span = tree.subtree_end - rel;
                let mut buf = vec![T::zeroed(); span * b];
                match tree.parent {
                    Some(p) => self.recv((p + root) % n, &mut buf)?,
                    None => {
                        for j in 0..n {
                            let abs = (j + root) % n;
                            buf[j * b..(j + 1) * b].copy_from_slice(&src[abs * b..(abs + 1) * b]);
                        }
                    }
                }
                for &c in &tree.children {
                    let child_end = Knomial::new(2, n, c).subtree_end;
                    self.send((c + root) % n, &buf[(c - rel) * b..(child_end - rel) * b])?;
                }
                dst.copy_from_slice(&buf[..b]);
                Ok(())
            }
        }
    }

    // ----- exchange ---------------------------------------------------------------------

    /// All-to-all: block `j` of `src` goes to member `j`, and block `i` of `dst` comes from
    /// member `i` (blocks of `src.len() / size` elements).
    pub fn exchange<T: Pod>(&self, src: &[T], dst: &mut [T]) -> Result<()> {
        let _call = self.check_call(
            Collective::Exchange,
            None,
            src.len(),
            std::mem::size_of::<T>(),
            None,
        )?;
        let n = self.size();
        if !src.len().is_multiple_of(n) || dst.len() != src.len() {
            return Err(CoreError::Invalid(format!(
                "exchange: src has {} elements and dst {}; both must be the same multiple of the team size {n}",
                src.len(),
                dst.len()
            ))
            .into());
        }
        let b = src.len() / n;
        // Equal blocks: ranges computed, nothing allocated (this is the per-call cost of
        // small all-to-alls, OpenSHMEM's `alltoall` among them).
        let block = |j: usize| j * b..(j + 1) * b;
        self.exchange_blocks(src, block, dst, block, true)
    }

    /// Check an all-to-all with varying counts (one count per member each way, totals
    /// matching the buffers, this member's own block the same both ways) and return the
    /// offsets of the send and receive blocks.
    pub(super) fn exchange_v_layout(
        &self,
        src_len: usize,
        send_counts: &[usize],
        dst_len: usize,
        recv_counts: &[usize],
    ) -> Result<(Vec<usize>, Vec<usize>)> {
        let n = self.size();
        if send_counts.len() != n || recv_counts.len() != n {
            return Err(CoreError::Invalid(format!(
                "exchange_v: counts need one entry per member ({n})"
            ))
            .into());
        }
        let (send_total, recv_total): (usize, usize) =
            (send_counts.iter().sum(), recv_counts.iter().sum());
        if send_total != src_len || recv_total != dst_len {
            return Err(CoreError::Invalid(format!(
                "exchange_v: counts add up to {send_total} sent and {recv_total} received, but src has {src_len} and dst {dst_len}"
            ))
            .into());
        }
        let me = self.me;
        if recv_counts[me] != send_counts[me] {
            return Err(length_error(
                "exchange_v (own block)",
                "recv_counts[me]",
                recv_counts[me],
                send_counts[me],
            ));
        }
        let offsets = |counts: &[usize]| -> Vec<usize> {
            counts
                .iter()
                .scan(0, |acc, &c| {
                    let start = *acc;
                    *acc += c;
                    Some(start)
                })
                .collect()
        };
        Ok((offsets(send_counts), offsets(recv_counts)))
    }

    /// All-to-all with varying counts: `send_counts[j]` elements (consecutive in `src`) go
    /// to member `j`; `recv_counts[i]` elements (consecutive in `dst`) come from member `i`.
    pub fn exchange_v<T: Pod>(
        &self,
        src: &[T],
        send_counts: &[usize],
        dst: &mut [T],
        recv_counts: &[usize],
    ) -> Result<()> {
        // Counts differ between members here, so the signature leaves them out.
        let _call = self.begin_call(Signature::new(
            Collective::Exchange,
            Form::Blocking,
            None,
            0,
            std::mem::size_of::<T>(),
            None,
        ));
        let (so, ro) = self.exchange_v_layout(src.len(), send_counts, dst.len(), recv_counts)?;
        self.exchange_blocks(
            src,
            |j| so[j]..so[j] + send_counts[j],
            dst,
            |i| ro[i]..ro[i] + recv_counts[i],
            false,
        )
    }

    /// The all-to-all itself: `send(j)` is the range of `src` that goes to member `j`,
    /// `recv(i)` the range of `dst` that comes from member `i` (checked, consecutive and
    /// in member order). `uniform`: every member passes equal counts (an
    /// [`Team::exchange`]), which MPI's all-to-all needs. Equal counts on this member
    /// alone do not say that, and members must all choose MPI or all not.
    pub(super) fn exchange_blocks<T: Pod>(
        &self,
        src: &[T],
        send: impl Fn(usize) -> std::ops::Range<usize>,
        dst: &mut [T],
        recv: impl Fn(usize) -> std::ops::Range<usize>,
        uniform: bool,
    ) -> Result<()> {
        let n = self.size();
        let me = self.me;
        dst[recv(me)].copy_from_slice(&src[send(me)]);
        match self.choose(
            Collective::Exchange,
            std::mem::size_of_val(src) / n,
            uniform,
        ) {
            Algorithm::Native => self.native(
                NativeOp::Exchange,
                bytemuck::cast_slice(src),
                bytemuck::cast_slice_mut(dst),
            ),
            Algorithm::Flat => {
                let mut sends: Vec<Outgoing> = (0..n)
                    .filter(|&j| j != me)
                    .map(|j| Outgoing::new(j, bytemuck::cast_slice(&src[send(j)])))
                    .collect();
                let mut rest: &mut [T] = dst;
                let mut recvs = Vec::with_capacity(n - 1);
                let mut consumed = 0;
                for i in 0..n {
                    let range = recv(i);
                    let (head, tail) = std::mem::take(&mut rest).split_at_mut(range.end - consumed);
                    consumed = range.end;
                    rest = tail;
                    if i != me {
                        let start = head.len() - range.len();
                        recvs.push(Incoming::new(
                            i,
                            bytemuck::cast_slice_mut(&mut head[start..]),
                        ));
                    }
                }
                self.channel.transfer(self.ctx, &mut sends, &mut recvs)
            }
            _ => {
                for s in 1..n {
                    let (to, from) = ((me + s) % n, (me + n - s) % n);
                    self.sendrecv(to, &src[send(to)], from, &mut dst[recv(from)])?;
                }
                Ok(())
            }
        }
    }
}
