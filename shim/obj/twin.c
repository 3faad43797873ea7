/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * FI_HMEM twins: what a provider granted to the application's hints plus
 * FI_HMEM, kept for the entries of the application's answer (getinfo.c)
 * whose provider really registers CUDA memory, so that hmem.c can give
 * FI_HMEM to the domains and endpoints opened from them. The application
 * never sees a twin.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hml.h"
#include "hml_log.h"
#include "hml_probe.h"

#define KEY_MAX 160
#define VERDICTS 32
#define TWINS 32

/* Does the provider register CUDA memory, per provider, fabric and
 * domain. */
static struct verdict {
	char key[KEY_MAX];
	bool works;
} verdicts[VERDICTS];
static int nverdicts;

/* A twin, by the identity of the entries it stands for. */
static struct twin {
	char key[KEY_MAX];
	enum fi_ep_type type;
	uint32_t protocol, addr_format;
	uint64_t caps;			/* the twin's, FI_HMEM among them */
	struct hml_twin t;
} twins[TWINS];
static int ntwins;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static bool has_attrs(const struct fi_info *info)
{
	return info->fabric_attr && info->domain_attr && info->ep_attr &&
	       info->tx_attr;
}

static void key_of(const struct fi_info *info, char *key)
{
	snprintf(key, KEY_MAX, "%s/%s/%s", info->fabric_attr->prov_name,
		 info->fabric_attr->name, info->domain_attr->name);
}

/* probe.c, through libfabric's own fi_fabric, with hml_depth raised so
 * that nothing of the probe is wrapped. */
static bool probe(const struct fi_info *info)
{
	static hml_fabric_fn fabric_open;

	if (!fabric_open)
		fabric_open = hml_resolve("fi_fabric", "FABRIC_1.1");
	return fabric_open &&
	       HML_FORWARD(hml_registers_cuda(fabric_open, info));
}

/* Under lock: the verdict for the twin's provider and domain, probed
 * once and said once. */
static bool works(const struct fi_info *twin, const char *key)
{
	struct verdict *v;
	bool ok;

	for (int i = 0; i < nverdicts; i++)
		if (!strcmp(verdicts[i].key, key))
			return verdicts[i].works;
	ok = probe(twin);
	if (ok)
		hml_info("%s: FI_HMEM asked for on the application's behalf",
			 key);
	else
		hml_info("%s: FI_HMEM not asked for: the provider cannot "
			 "register CUDA memory (libfabric's CUDA support did "
			 "not start)", key);
	if (nverdicts < VERDICTS) {
		v = &verdicts[nverdicts++];
		strcpy(v->key, key);
		v->works = ok;
	}
	return ok;
}

static bool same_id(const struct twin *w, const struct fi_info *info,
		    const char *key)
{
	return !strcmp(w->key, key) && w->type == info->ep_attr->type &&
	       w->protocol == info->ep_attr->protocol &&
	       w->addr_format == info->addr_format;
}

/* What the twin asks of the registrations beyond the entry's modes is
 * at most FI_MR_HMEM (the application registers device memory, as its
 * hints said). Entries of one answer may share a twin (shm with CUDA
 * answers with its own entry and its FI_HMEM one), so this is asked of
 * each entry, and the twin keeps only what is its own. */
static bool fits(const struct fi_info *entry, uint64_t twin_mode)
{
	return !(twin_mode & ~(uint64_t) entry->domain_attr->mr_mode &
		 ~(uint64_t) FI_MR_HMEM);
}

/* Keep twin for entry where the provider registers CUDA memory and the
 * twin fits the entry; true if it is kept. */
bool hml_twin_keep(const struct fi_info *entry, const struct fi_info *twin)
{
	char key[KEY_MAX];
	struct twin *w = NULL;
	uint64_t mode;
	bool ok;

	if (!has_attrs(entry) || !has_attrs(twin))
		return false;
	mode = (uint64_t) twin->domain_attr->mr_mode;
	key_of(twin, key);
	pthread_mutex_lock(&lock);
	ok = works(twin, key);
	if (ok && !fits(entry, mode)) {
		hml_info_once("%s: FI_HMEM not asked for: with it the provider "
			      "needs registration modes %#llx the application "
			      "was not given", key, (unsigned long long)
			      (mode & ~(uint64_t) entry->domain_attr->mr_mode));
		ok = false;
	}
	for (int i = 0; ok && i < ntwins && !w; i++)
		if (same_id(&twins[i], twin, key) &&
		    twins[i].caps == twin->caps)
			w = &twins[i];
	if (ok && !w && ntwins < TWINS)
		w = &twins[ntwins++];
	if (w) {
		strcpy(w->key, key);
		w->type = twin->ep_attr->type;
		w->protocol = twin->ep_attr->protocol;
		w->addr_format = twin->addr_format;
		w->caps = twin->caps;
		w->t.mr_mode = mode;
		w->t.inject_size = twin->tx_attr->inject_size;
	}
	pthread_mutex_unlock(&lock);
	return w != NULL;
}

/* The twin kept for an entry such as info: same provider, fabric,
 * domain, endpoint type, protocol and address format, capabilities the
 * twin has, and registration modes it fits. */
bool hml_twin_find(const struct fi_info *info, struct hml_twin *t)
{
	char key[KEY_MAX];
	bool found = false;

	if (!has_attrs(info))
		return false;
	key_of(info, key);
	pthread_mutex_lock(&lock);
	for (int i = 0; i < ntwins && !found; i++) {
		found = same_id(&twins[i], info, key) &&
			!(info->caps & ~twins[i].caps) &&
			fits(info, twins[i].t.mr_mode);
		if (found)
			*t = twins[i].t;
	}
	pthread_mutex_unlock(&lock);
	return found;
}
