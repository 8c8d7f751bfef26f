/* alloc_count.h — counts heap allocations of the test process, to check the
 * no-allocation rule of the training step (include once per test binary,
 * after <cmocka.h>): n_allocs counts malloc, calloc, realloc, aligned
 * allocations and frees made while `counting` is set.
 *
 * Normally the test binary interposes malloc & co. (the executable's
 * definitions win over libc's for every library in the process, OpenBLAS
 * included).  Under AddressSanitizer the allocator belongs to ASan, which
 * reports every allocation and free to hooks installed with
 * __sanitizer_install_malloc_and_free_hooks (libasan exports it; GCC ships
 * no header declaring it, hence the declaration here). */
#ifndef PT_ALLOC_COUNT_H
#define PT_ALLOC_COUNT_H

#include <stddef.h>

static volatile int counting;
static volatile long n_allocs;
#define PT_COUNT_ALLOCS 1

#if defined(__SANITIZE_ADDRESS__)
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));
static void pt_count_malloc(const volatile void *p, size_t n)
{
    (void)p;
    (void)n;
    if (counting) n_allocs++;
}
static void pt_count_free(const volatile void *p)
{
    if (counting && p) n_allocs++;
}
__attribute__((constructor)) static void pt_count_install(void)
{
    __sanitizer_install_malloc_and_free_hooks(pt_count_malloc, pt_count_free);
}
#else
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
void *malloc(size_t n)
{
    if (counting) n_allocs++;
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
    if (counting) n_allocs++;
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
    if (counting) n_allocs++;
    return __libc_realloc(p, n);
}
void *aligned_alloc(size_t al, size_t n)
{
    if (counting) n_allocs++;
    return __libc_memalign(al, n);
}
int posix_memalign(void **out, size_t al, size_t n)
{
    if (counting) n_allocs++;
    *out = __libc_memalign(al, n);
    return *out ? 0 : 12;
}
void free(void *p)
{
    if (counting && p) n_allocs++;
    __libc_free(p);
}
#endif

#endif
