/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The endpoints of this process: every enabled connectionless endpoint's
 * name is in one registry, which address vectors ask whether an address is
 * this process's (selfaddr.c; avcache.c keeps their answers).
 */
#include <string.h>

#include "hml.h"
#include "hml_log.h"

static pthread_rwlock_t self_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct hml_ep *self_head;
unsigned int hml_self_gen = 1;

/* An EFA address holds GID, QPN, padding, QKEY and a pointer; only the
 * first three name the endpoint (libfabric's efa_is_same_addr). */
#define EFA_NAME_LEN 24
#define EFA_PAD_OFF 18
#define EFA_PAD_LEN 2

/* A string address without its "scheme://": shm of libfabric 2.x names an
 * endpoint "fi_shm://PID:..." but looks the same address up without the
 * scheme (smr_no_prefix). */
static const char *no_scheme(const char *s, size_t *len)
{
	const char *p = memmem(s, *len, "://", 3);

	if (!p)
		return s;
	*len -= p + 3 - s;
	return p + 3;
}

bool hml_self_is(const struct hml_ep *e, const void *addr, size_t len,
		 uint32_t format)
{
	const char *name = e->name;
	size_t namelen = e->namelen;

	if (e->addr_format != format)
		return false;
	if (format == FI_ADDR_EFA)
		return len >= EFA_NAME_LEN && namelen >= EFA_NAME_LEN &&
		       !memcmp(name, addr, EFA_PAD_OFF) &&
		       !memcmp(name + EFA_PAD_OFF + EFA_PAD_LEN,
			       (const char *) addr + EFA_PAD_OFF + EFA_PAD_LEN,
			       EFA_NAME_LEN - EFA_PAD_OFF - EFA_PAD_LEN);
	if (format == FI_ADDR_STR) {
		name = no_scheme(name, &namelen);
		addr = no_scheme(addr, &len);
	}
	return len == namelen && !memcmp(name, addr, len);
}

static bool unlink_locked(struct hml_ep *e)
{
	for (struct hml_ep **p = &self_head; *p; p = &(*p)->self_next) {
		if (*p == e) {
			*p = e->self_next;
			return true;
		}
	}
	return false;
}

void hml_self_add(struct hml_ep *e)
{
	pthread_rwlock_wrlock(&self_lock);
	unlink_locked(e);
	e->self_next = self_head;
	self_head = e;
	__atomic_add_fetch(&hml_self_gen, 1, __ATOMIC_RELEASE);
	pthread_rwlock_unlock(&self_lock);
	hml_debug("endpoint %p is local (%zu-byte name)", e->ep, e->namelen);
}

void hml_self_remove(struct hml_ep *e)
{
	pthread_rwlock_wrlock(&self_lock);
	if (unlink_locked(e))
		__atomic_add_fetch(&hml_self_gen, 1, __ATOMIC_RELEASE);
	pthread_rwlock_unlock(&self_lock);
}

/* The child of a fork() is a new process: none of these endpoints is
 * its own, and every verdict and "all remote" mark goes stale with the
 * generation. Its only thread may have been forked while another held the
 * lock. */
static void forked(void)
{
	pthread_rwlock_init(&self_lock, NULL);
	self_head = NULL;
	__atomic_add_fetch(&hml_self_gen, 1, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void self_init(void)
{
	pthread_atfork(NULL, NULL, forked);
}

struct hml_ep *hml_self_find(const void *addr, size_t len, uint32_t format)
{
	struct hml_ep *e;

	pthread_rwlock_rdlock(&self_lock);
	for (e = self_head; e; e = e->self_next)
		if (hml_self_is(e, addr, len, format))
			break;
	pthread_rwlock_unlock(&self_lock);
	return e;
}
