/* Helper of options_test.sh, linked to libjwmalloc.so: prints the value of
 * each option named on the command line (NAME=value, from jw_option_get),
 * after doing what the flags ask of a program's end:
 *   --close-stderr   fclose(stderr) before exit, as GNU tools do
 *   --scribble-env   overwrite every environment string in place, as
 *                    programs that set their process title do
 *   --exit N         exit with status N (through exit(), so the exit
 *                    report runs)
 *   --set-first NAME=V  (first argument only) jw_option_set before any
 *                    allocation: the first call into jwmalloc */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jwmalloc.h"

extern char **environ;

int main(int argc, char **argv) {
  int close_stderr = 0, status = 0;
  if (argc > 2 && strcmp(argv[1], "--set-first") == 0) {
    char *eq = strchr(argv[2], '=');
    if (eq == NULL) return 2;
    *eq = 0;
    if (jw_option_set(argv[2], atol(eq + 1)) != 0) printf("%s refused\n", argv[2]);
    argv += 2, argc -= 2;
  }
  free(malloc(100)); /* jwmalloc starts (options read) */
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--close-stderr") == 0) {
      close_stderr = 1;
    } else if (strcmp(argv[i], "--scribble-env") == 0) {
      for (char **e = environ; *e; e++) memset(*e, 'Z', strlen(*e));
    } else if (strcmp(argv[i], "--exit") == 0 && i + 1 < argc) {
      status = atoi(argv[++i]);
    } else {
      long v;
      if (jw_option_get(argv[i], &v) == 0) printf("%s=%ld\n", argv[i], v);
      else printf("%s unknown\n", argv[i]);
    }
  }
  fflush(stdout);
  if (close_stderr) fclose(stderr);
  exit(status);
}
