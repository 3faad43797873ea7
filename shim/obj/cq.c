/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Completion queues. Every read path returns hmemloop's entries first,
 * then the provider's; while hmemloop has none, a read costs one load more
 * than the provider's own. On a CQ where receives of tracked endpoints
 * complete, each provider entry passes the receive records (filter.c), so
 * that a receive's completion retires its record and gets the
 * application's context back (the provider knows the receive by the
 * record's), and the cancels hmemloop asked for never reach the
 * application: in place, in the application's buffer, two comparisons an
 * entry; an error goes through the pump.
 *
 * Providers call their own CQ's ops through the fid (util's read calls
 * fi_cq_readfrom, its sread fi_cq_readfrom too), so those calls land in
 * the wrappers below. No loop can form because each wrapper forwards only
 * to the provider's op of its own name (read to read, readfrom to
 * readfrom, sread to sread), whatever its arguments; the one exception,
 * the pump, calls the provider's readfrom, which no provider implements
 * through the fid.
 */
#include <stdlib.h>
#include <time.h>

#include "hml_log.h"
#include "hml_msg.h"
#include "hml_op.h"

/* The CQ this thread sleeps on in the provider's sread, and whether the
 * provider read it through the shim meanwhile (util providers do). */
static __thread struct hml_cq *in_sread;
static __thread bool nested_pump;
/* The CQ whose provider's read this thread is in, from a quiet read:
 * util's read comes back through the readfrom op, ours, which then goes
 * straight to the provider. */
static __thread struct hml_cq *in_read;

/* Someone may sleep on the CQ without reading it (delta 1: a thread in
 * its sread, its wait object handed out, a wait set), or no longer (-1):
 * its entries are made at post, and its domain holds no receive
 * meanwhile. */
static void watched(struct hml_cq *c, int delta)
{
	hml_inflight_watch(delta);
	hml_hold_off(c->domain, delta);
}

/* The CQ, before its provider is called: the receives its domain holds
 * go to the provider first (hold.c). */
static struct hml_cq *cq_of(struct fid_cq *cq)
{
	struct hml_cq *c = hml_container_of(cq->ops, struct hml_cq, ops.ops);

	hml_hold_flush(c->domain);
	return c;
}

static bool pending(struct hml_cq *c)
{
	return __atomic_load_n(&c->pending, __ATOMIC_ACQUIRE);
}

static bool filtering(struct hml_cq *c)
{
	return __atomic_load_n(&c->nrxqs, __ATOMIC_ACQUIRE);
}

/*
 * The shim's entries, then the provider's for the rest of buf: reading
 * drives a manual-progress provider whenever the shim leaves room. An
 * error the provider has waiting is reported on the next read.
 */
static ssize_t merge(ssize_t ours, ssize_t theirs)
{
	if (theirs > 0)
		return ours + theirs;
	return ours ? ours : theirs;
}

/* The provider's read, or its readfrom as the application called. Not
 * derived from src: util's read calls the CQ's readfrom op, ours, with
 * src NULL, and must not be sent back to read. */
static ssize_t prov_read(struct hml_cq *c, void *buf, size_t count,
			 fi_addr_t *src, bool from)
{
	return from ? c->prov->readfrom(c->cq, buf, count, src) :
		      c->prov->read(c->cq, buf, count);
}

/*
 * util's sread reads through the CQ's ops, so the shim's sread (below)
 * answers there too. It hands out none of its own entries there, so that
 * util goes on to the wakeup flag the shim's fi_cq_signal set and spends
 * it, returning -FI_EAGAIN; the shim's sread returns its entries after.
 * Of the provider's, it passes on those the receive records let through,
 * waking util if all it found were for the shim.
 */
static ssize_t nested(struct hml_cq *c, void *buf, size_t count,
		      fi_addr_t *src, bool from)
{
	nested_pump = true;
	if (!filtering(c))
		return prov_read(c, buf, count, src, from);
	hml_rx_pump(c);
	if (pending(c))
		c->prov->signal(c->cq);
	return -FI_EAGAIN;
}

/*
 * A read of no entries drives progress and asks whether there are any:
 * poll sets ask so (0 for yes, as util CQs answer). Where receive records
 * filter the CQ, the provider is asked first, as the pump reads: only
 * where it has entries do the records sort out whether one is the
 * application's. util's read calls the CQ's readfrom op, which is ours:
 * each wrapper forwards to the same op it was called as, or the two would
 * call each other for ever.
 */
static ssize_t probe(struct hml_cq *c, fi_addr_t *src, bool from)
{
	fi_addr_t one;
	ssize_t n;

	if (in_sread != c && hml_inflight_any())
		hml_inflight_progress();
	if (pending(c))
		return 0;
	if (!filtering(c))
		return prov_read(c, NULL, 0, src, from);
	n = c->from ? c->prov->readfrom(c->cq, NULL, 0, &one) :
		      c->prov->read(c->cq, NULL, 0);
	if (n)
		return n;
	hml_rx_pump(c);
	return pending(c) ? 0 : -FI_EAGAIN;
}

/* Nothing of the shim's here, and nothing in flight anywhere: the
 * provider's read, as if unwrapped. */
static inline __attribute__((always_inline)) bool quiet(struct hml_cq *c)
{
	return !(__atomic_load_n(&c->pending, __ATOMIC_ACQUIRE) |
		 __atomic_load_n(&c->nrxqs, __ATOMIC_ACQUIRE) |
		 __atomic_load_n(&hml_inflight, __ATOMIC_ACQUIRE)) &&
	       in_sread != c;
}

/* Operations whose copies have landed are completed first, unless the
 * provider is reading through the shim from inside its sread, or the
 * shim's entries fill the read already: asking the driver costs a
 * microsecond, and the next read asks. */
static void progress(struct hml_cq *c, size_t count)
{
	if (in_sread != c && hml_inflight_any() &&
	    __atomic_load_n(&c->pending, __ATOMIC_ACQUIRE) < count)
		hml_inflight_progress();
}

/*
 * The provider's entries into buf, through the receive records: read and
 * passed under the pump's lock, so that a record's entries are seen in
 * the provider's order, unless the application never reads the CQ from
 * two threads at once. Read with the provider's readfrom, as the pump
 * reads: util's read calls the CQ's readfrom op, ours, which would come
 * back here. An error is the pump's to read, then hmemloop's to hand out.
 */
#define FILTER_MAX 64

static ssize_t filtered(struct hml_cq *c, void *buf, size_t count,
			fi_addr_t *src)
{
	fi_addr_t mine[FILTER_MAX];
	ssize_t n;

	if (!src && count > FILTER_MAX)
		count = FILTER_MAX;
	if (!c->serial)
		hml_pump_lock(c);
	n = c->from ? c->prov->readfrom(c->cq, buf, count, src ? src : mine) :
		      -FI_ENOSYS;
	if (n == -FI_ENOSYS) {
		c->from = false;
		n = c->prov->read(c->cq, buf, count);
	}
	if (n > 0)
		n = hml_rx_filter(c, buf, n, src);
	if (!c->serial)
		hml_pump_unlock(c);
	if (n == -FI_EAVAIL) {
		hml_rx_pump(c);
		n = hml_cq_take(c, buf, count, src);
	}
	return n ? n : -FI_EAGAIN;
}

static ssize_t shim_read(struct hml_cq *c, void *buf, size_t count,
			 fi_addr_t *src, bool from)
{
	ssize_t n = 0;

	if (!buf || !count)
		return probe(c, src, from);
	progress(c, count);
	if (in_sread == c)
		return nested(c, buf, count, src, from);
	if (pending(c))
		n = hml_cq_take(c, buf, count, src);
	/* A read hmemloop filled drives no progress: the next one will. */
	if (n < 0 || (size_t) n == count)
		return n;
	buf = (char *) buf + n * c->entry_size;
	src = src ? src + n : NULL;
	return merge(n, filtering(c) ? filtered(c, buf, count - n, src) :
				       prov_read(c, buf, count - n, src, from));
}

/* Nothing of the shim's here and nothing in flight, but receive records
 * to pass the provider's entries through: the filter alone. */
static bool calm(struct hml_cq *c, const void *buf, size_t count)
{
	return !(__atomic_load_n(&c->pending, __ATOMIC_ACQUIRE) |
		 __atomic_load_n(&hml_inflight, __ATOMIC_ACQUIRE)) &&
	       in_sread != c && buf && count;
}

static ssize_t hml_cq_read(struct fid_cq *cq, void *buf, size_t count)
{
	struct hml_cq *c = cq_of(cq);
	ssize_t n;

	if (quiet(c)) {
		in_read = c;
		n = c->prov->read(cq, buf, count);
		in_read = NULL;
		return n;
	}
	if (calm(c, buf, count))
		return filtered(c, buf, count, NULL);
	return shim_read(c, buf, count, NULL, false);
}

static ssize_t hml_cq_readfrom(struct fid_cq *cq, void *buf, size_t count,
			       fi_addr_t *src)
{
	struct hml_cq *c = in_read;

	if (c && c->cq == cq)
		return c->prov->readfrom(cq, buf, count, src);
	c = cq_of(cq);
	if (quiet(c))
		return c->prov->readfrom(cq, buf, count, src);
	if (calm(c, buf, count))
		return filtered(c, buf, count, src);
	return shim_read(c, buf, count, src, true);
}

static ssize_t hml_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf,
			      uint64_t flags)
{
	struct hml_cq *c = cq_of(cq);
	/* The application's entry, in the layout of its API version. */
	struct hml_cq_err *err = (struct hml_cq_err *) buf;

	progress(c, 1);
	if (pending(c) && hml_cq_take_err(c, err))
		return 1;
	if (!filtering(c))
		return c->prov->readerr(cq, buf, flags);
	hml_rx_pump(c);
	return hml_cq_take_err(c, err) ? 1 : -FI_EAGAIN;
}

/*
 * Blocking reads. The shim's entries are returned at once. Otherwise the
 * thread sleeps in the provider, counted as a sleeper so that a producer
 * of shim entries wakes it (fi_cq_signal on the provider's CQ). util
 * providers read through the CQ's ops inside their sread, so the shim's
 * read wrappers answer there; other providers' sread hands back entries
 * that did not pass the receive records yet, and they pass here.
 */
/* FI_CQ_COND_THRESHOLD: the shim's entries count toward the threshold
 * (called with fewer than it). */
static const void *less_cond(const struct hml_cq *c, const void *cond,
			     ssize_t have)
{
	if (c->wait_cond != FI_CQ_COND_THRESHOLD || !cond)
		return cond;
	return (const void *) ((uintptr_t) cond - have);
}

/* Entries enough to return without sleeping: any, or the threshold. */
static bool enough(const struct hml_cq *c, const void *cond, ssize_t n)
{
	if (c->wait_cond == FI_CQ_COND_THRESHOLD && cond)
		return n >= (ssize_t) (uintptr_t) cond;
	return n > 0;
}

/* Sleep in the provider's sread, into buf; its entries counted. */
static ssize_t prov_sread(struct hml_cq *c, void *buf, size_t count,
			  fi_addr_t *src, bool from, const void *cond,
			  int timeout)
{
	ssize_t m;

	in_sread = c;
	nested_pump = false;
	m = from ? c->prov->sreadfrom(c->cq, buf, count, src, cond, timeout) :
		   c->prov->sread(c->cq, buf, count, cond, timeout);
	in_sread = NULL;
	if (m > 0 && filtering(c) && !nested_pump)
		m = hml_rx_filter(c, buf, m, src);
	return m;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int since(long start)
{
	return (int) (now_ms() - start);
}

/*
 * Whether the provider's sread, which answered m, ended for nothing the
 * caller would see, so that it sleeps again for what is left of its
 * timeout: a wake-up the shim sent that found no one asleep, or was for
 * an entry another reader took, is left in the provider (util's wakeup
 * flag), and ends the next sread at once; and a provider whose sread
 * reads its queue itself (sockets, the EFA double's shm) stops at an
 * error that may be a cancel the shim swallows. A signal of the
 * application's not answered yet (util: -FI_EAGAIN, sockets:
 * -FI_ECANCELED) ends it, as a shim entry does; the answer spends it.
 */
static bool again(struct hml_cq *c, ssize_t m)
{
	if (m == -FI_EAVAIL && filtering(c)) {
		hml_rx_pump(c);
		return !pending(c);
	}
	return (m == -FI_EAGAIN || m == -FI_ECANCELED) && !pending(c) &&
	       !__atomic_exchange_n(&c->app_signal, false, __ATOMIC_ACQ_REL);
}

static ssize_t sread(struct hml_cq *c, void *buf, size_t count,
		     fi_addr_t *src, bool from, const void *cond, int timeout)
{
	ssize_t n = 0, m = 0;
	long start = now_ms();
	char *rest;

	__atomic_add_fetch(&c->sleepers, 1, __ATOMIC_SEQ_CST);
	watched(c, 1);
	/* Copies posted from now on are waited for at post (inflight.c);
	 * those in flight now, here. */
	hml_inflight_drain();
	if (filtering(c))
		hml_rx_pump(c);
	if (pending(c))
		n = hml_cq_take(c, buf, count, src);
	if (n < 0 || (size_t) n == count || enough(c, cond, n))
		goto out;
	rest = (char *) buf + n * c->entry_size;
	for (;;) {
		m = prov_sread(c, rest, count - n, src ? src + n : NULL, from,
			       less_cond(c, cond, n), timeout);
		if (m > 0 || !again(c, m) ||
		    (timeout >= 0 && (timeout -= since(start)) <= 0))
			break;
		start = now_ms();
	}
out:
	__atomic_sub_fetch(&c->sleepers, 1, __ATOMIC_SEQ_CST);
	watched(c, -1);
	if (m > 0)
		return n + m;
	if (n)
		return n;
	/* Woken by a shim entry, or by the application's own signal
	 * (-FI_EAGAIN from util, -FI_ECANCELED from sockets); the entry
	 * may be gone to another reader meanwhile. */
	if (m == -FI_EAGAIN || m == -FI_ECANCELED || m == -FI_EAVAIL) {
		hml_inflight_drain();
		n = hml_cq_take(c, buf, count, src);
		if (n)
			return n;
	}
	return m ? m : -FI_EAGAIN;
}

static ssize_t hml_cq_sread(struct fid_cq *cq, void *buf, size_t count,
			    const void *cond, int timeout)
{
	struct hml_cq *c = cq_of(cq);

	if (c->wait_obj == FI_WAIT_NONE || !buf || !count)
		return c->prov->sread(cq, buf, count, cond, timeout);
	return sread(c, buf, count, NULL, false, cond, timeout);
}

static ssize_t hml_cq_sreadfrom(struct fid_cq *cq, void *buf, size_t count,
				fi_addr_t *src, const void *cond, int timeout)
{
	struct hml_cq *c = cq_of(cq);

	if (c->wait_obj == FI_WAIT_NONE || !buf || !count)
		return c->prov->sreadfrom(cq, buf, count, src, cond, timeout);
	return sread(c, buf, count, src, true, cond, timeout);
}

/* The application's fi_cq_signal: marked, so that a sread ends for it
 * where it would sleep again after a wake-up of the shim's (above). */
static int hml_cq_signal(struct fid_cq *cq)
{
	struct hml_cq *c = hml_container_of(cq->ops, struct hml_cq, ops.ops);

	__atomic_store_n(&c->app_signal, true, __ATOMIC_RELEASE);
	return c->prov->signal(cq);
}

/* The application will wait on the CQ's own wait object (an fd to epoll):
 * from now on every shim entry signals it. */
static int hml_cq_control(struct fid *fid, int command, void *arg)
{
	struct hml_cq *c = hml_container_of(fid->ops, struct hml_cq, h.fi.ops);
	int ret = c->h.prov->control(fid, command, arg);

	if (!ret && command == FI_GETWAIT &&
	    !__atomic_exchange_n(&c->exported, true, __ATOMIC_SEQ_CST))
		watched(c, 1);
	return ret;
}

/* fi_trywait: not safe to block while the shim has entries queued. */
bool hml_cq_busy(struct fid *fid)
{
	struct hml_fid *h = fid->fclass == FI_CLASS_CQ ? hml_fid_of(fid) : NULL;

	return h && pending(hml_container_of(h, struct hml_cq, h));
}

static void release(struct hml_fid *h)
{
	struct hml_cq *cq = hml_container_of(h, struct hml_cq, h);

	if (cq->exported)
		watched(cq, -1);
	if (cq->wait_obj == FI_WAIT_SET)
		watched(cq, -1);
	/* A shared receive context outlives the CQs of its endpoints. */
	while (cq->nrxqs)
		hml_rx_unwatch(cq, cq->rxqs[0]);
	/* fi_cq(3): completions left in a closed CQ are lost. */
	while (cq->count) {
		free(cq->ring[cq->head].err_data);
		cq->head = (cq->head + 1) % cq->cap;
		cq->count--;
	}
	free(cq->err_data);
	pthread_mutex_destroy(&cq->lock);
	free(cq->ring);
	free(cq);
}

void hml_cq_wrap(struct hml_domain *d, struct fid_cq *cq,
		 const struct fi_cq_attr *attr)
{
	struct hml_cq *c;

	/* A format the shim cannot write: it can report nothing here. */
	if (!hml_cq_entry_size(attr->format)) {
		hml_info("CQ %p has format %d: it passes through", cq,
			 attr->format);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		hml_warn("out of memory: completion queue %p passes through", cq);
		return;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->cq = cq;
	c->domain = d;
	c->format = attr->format;
	c->entry_size = hml_cq_entry_size(attr->format);
	c->size = attr->size ? attr->size : HML_CQ_DEFAULT_SIZE;
	c->wait_obj = attr->wait_obj;
	if (c->wait_obj == FI_WAIT_SET)
		watched(c, 1);
	c->wait_cond = attr->wait_cond;
	c->serial = d->threading == FI_THREAD_DOMAIN ||
		    d->threading == FI_THREAD_COMPLETION;
	c->from = true;
	if (hml_table_take(&cq->ops, &c->ops, c->prov)) {
		hml_table_set(&c->ops.ops, read, hml_cq_read);
		hml_table_set(&c->ops.ops, readfrom, hml_cq_readfrom);
		hml_table_set(&c->ops.ops, readerr, hml_cq_readerr);
		hml_table_set(&c->ops.ops, sread, hml_cq_sread);
		hml_table_set(&c->ops.ops, sreadfrom, hml_cq_sreadfrom);
		hml_table_set(&c->ops.ops, signal, hml_cq_signal);
		cq->ops = &c->ops.ops;
	}
	hml_fid_wrap(&c->h, &cq->fid, release);
	c->h.quiesce = hml_inflight_drain;
	hml_table_set(&c->h.fi.ops, control, hml_cq_control);
}
