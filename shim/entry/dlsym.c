/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * dlsym(): a program that opens libfabric itself and looks fi_fabric up in
 * its handle, as ctypes-style bindings do, gets the wrapped entry point,
 * as a program linked with libfabric does.
 *
 * glibc's dlsym resolves RTLD_DEFAULT and RTLD_NEXT against the object of
 * its caller, found by the return address. Those two are therefore not
 * called but jumped to, from a few instructions of assembly, so that libc
 * sees the program's return address; they need nothing from hmemloop,
 * whose fi_fabric comes first in the global scope. A lookup in a handle
 * does not depend on the caller and is answered in C. Other architectures
 * than x86-64 keep glibc's dlsym (README's Limits).
 */
#include <dlfcn.h>

#include "hml.h"

#ifdef __x86_64__

typedef void *(*dlsym_fn)(void *handle, const char *name);

/* Sanitizer runtimes find what they intercept with dlsym(RTLD_NEXT)
 * before they are ready: the way there must not call into them. */
#define UNSANITIZED __attribute__((no_sanitize("address", "thread", \
						 "undefined")))

/* The next dlsym: libc's, or that of an interposer preloaded after us. */
dlsym_fn hml_next_dlsym;

dlsym_fn hml_find_dlsym(void);
void *hml_dlsym_handle(void *handle, const char *name);
HML_EXPORT void *hml_dlsym(void *handle, const char *name);

UNSANITIZED dlsym_fn hml_find_dlsym(void)
{
	dlsym_fn fn = (dlsym_fn) dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");

	if (!fn)
		fn = (dlsym_fn) dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	__atomic_store_n(&hml_next_dlsym, fn, __ATOMIC_RELEASE);
	return fn;
}

UNSANITIZED void *hml_dlsym_handle(void *handle, const char *name)
{
	dlsym_fn next = __atomic_load_n(&hml_next_dlsym, __ATOMIC_ACQUIRE);
	void *sym = (next ? next : hml_find_dlsym())(handle, name);

	return sym && name ? hml_entry_point(name, sym) : sym;
}

/*
 * RTLD_DEFAULT is 0 and RTLD_NEXT is -1: handle + 1 <= 1 for both. The
 * next dlsym is found on the first call, with the arguments kept.
 */
__asm__(
"	.text\n"
"	.globl	hml_dlsym\n"
"	.type	hml_dlsym, @function\n"
"hml_dlsym:\n"
"	.cfi_startproc\n"
"	endbr64\n"
"	leaq	1(%rdi), %rax\n"
"	cmpq	$1, %rax\n"
"	ja	hml_dlsym_handle\n"
"	movq	hml_next_dlsym(%rip), %rax\n"
"	testq	%rax, %rax\n"
"	jz	1f\n"
"	jmp	*%rax\n"
"1:	pushq	%rdi\n"
"	.cfi_adjust_cfa_offset 8\n"
"	pushq	%rsi\n"
"	.cfi_adjust_cfa_offset 8\n"
"	subq	$8, %rsp\n"
"	.cfi_adjust_cfa_offset 8\n"
"	call	hml_find_dlsym\n"
"	addq	$8, %rsp\n"
"	.cfi_adjust_cfa_offset -8\n"
"	popq	%rsi\n"
"	.cfi_adjust_cfa_offset -8\n"
"	popq	%rdi\n"
"	.cfi_adjust_cfa_offset -8\n"
"	jmp	*%rax\n"
"	.cfi_endproc\n"
"	.size	hml_dlsym, .-hml_dlsym\n"
"	.set	hml_dlsym_2_2_5, hml_dlsym\n"
"	.globl	hml_dlsym_2_2_5\n"
"	.symver	hml_dlsym, dlsym@@GLIBC_2.34\n"
"	.symver	hml_dlsym_2_2_5, dlsym@GLIBC_2.2.5\n"
);

#endif
