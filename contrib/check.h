/* SPDX-License-Identifier: BSD-2-Clause */
/* hmemloop-check: what hmemloop --check finds, and how it is printed. */
#ifndef CHECK_H
#define CHECK_H

#include <stdbool.h>
#include <limits.h>
#include <stddef.h>

#define CHECK_PROVS 32
#define CHECK_GPUS 16

enum prov_hmem {
	HMEM_NOT_GRANTED,	/* no FI_HMEM in its answers */
	HMEM_NO_CUDA,		/* granted, CUDA registrations refused */
	HMEM_CUDA,		/* granted, CUDA registrations work */
};

struct check {
	struct {
		bool loaded;
		char path[PATH_MAX], version[32], error[256];
		struct prov {
			char name[64], version[16];
			bool rdm;		/* reliable datagram endpoints */
			enum prov_hmem hmem;
		} provs[CHECK_PROVS];
		int nprovs;
	} fabric;
	struct {
		const char *library;
		bool loaded, copies;
		char path[PATH_MAX], error[256];
		int version, ngpus;
		struct { char name[128]; size_t mem; } gpus[CHECK_GPUS];
	} cuda;
	struct {
		const char *path;
		bool loaded;
		const char *version;
		char error[256];
	} lib;
	bool works;
	char why[256];
};

/* dlopen name RTLD_NOW with flags; the file it opened into path, or
 * dlerror() into error. */
void *check_open(const char *name, int flags, char path[PATH_MAX],
		 char error[256]);
void check_fabric(struct check *c);
void check_cuda(struct check *c);
void check_print_text(const struct check *c);
void check_print_json(const struct check *c);
/* --settings FORMAT: the settings list as text, man, markdown or names. */
int settings_doc(const char *format);

#endif
