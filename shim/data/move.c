/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Moving an operation's bytes: with memcpy between host buffers, with the
 * CUDA driver where a device buffer is involved (copy.c).
 */
#include <string.h>

#include "hml_op.h"

/* The device whose context does the copy: the destination's if it is on
 * one, else the source's. */
static const struct hml_mem *copy_device(const struct hml_side *dst,
					 const struct hml_side *src)
{
	const struct hml_mem *m = hml_side_device(dst);

	return m ? m : hml_side_device(src);
}

/*
 * Copy len bytes from src's buffers to dst's, both taken end to end. With
 * op, the device's pieces are posted for op's initiator, after its other
 * copies, and waited for only if op's completion is not deferred (op's
 * ticket); host bytes are copied at once, after the copies the initiator
 * has in flight, which they may read or overwrite.
 */
int hml_move(const struct hml_side *dst, const struct hml_side *src,
	     size_t len, struct hml_op *op)
{
	const struct hml_mem *dev = copy_device(dst, src);
	struct hml_copy copy;
	size_t di = 0, si = 0, doff = 0, soff = 0;
	bool waited = !op;
	int err;

	/* An ordered copy goes to the driver after those queued before it,
	 * never in a batch with them, which the driver runs in any order. */
	if (dev && hml_copy_begin(&copy, dev, op && hml_op_deferred(op) &&
				  !op->ordered))
		return hml_copy_end(&copy);
	if (dev && op)
		hml_inflight_order(op->e, &copy);
	while (len) {
		size_t n = len;
		char *d = (char *) dst->iov[di].iov_base + doff;
		char *s = (char *) src->iov[si].iov_base + soff;

		if (n > dst->iov[di].iov_len - doff)
			n = dst->iov[di].iov_len - doff;
		if (n > src->iov[si].iov_len - soff)
			n = src->iov[si].iov_len - soff;
		if (dst->mem[di].type == HML_MEM_HOST &&
		    src->mem[si].type == HML_MEM_HOST) {
			if (!waited)
				hml_inflight_wait(op->e);
			waited = true;
			memcpy(d, s, n);
		} else
			hml_copy_piece(&copy, d, &dst->mem[di], s,
				       &src->mem[si], n);
		len -= n;
		doff += n;
		soff += n;
		if (doff == dst->iov[di].iov_len) {
			di++;
			doff = 0;
		}
		if (soff == src->iov[si].iov_len) {
			si++;
			soff = 0;
		}
	}
	if (!dev)
		return 0;
	if (!op)
		return hml_copy_end(&copy);
	err = hml_copy_post(&copy, &op->ticket);
	return err || hml_op_deferred(op) ? err : hml_ticket_land(&op->ticket);
}

