/* Anchor for libiosr.so: the library is iosr_core linked whole. */
typedef int iosr_api_anchor;
