/* Prints IOSR's options table for check_options_documented.py: one line per
 * option, "option NAME DEFAULT RUNTIME" (NAME as the environment variable,
 * DEFAULT as the README writes it, RUNTIME yes or no), then one line per
 * IOSR_* name read outside the table, "other NAME documented|internal"
 * (common/opts.c, common/env.c).
 */
#include <ctype.h>
#include <stdio.h>

#include "common/env.h"
#include "common/opts.h"

int main(void) {
  const char *key;
  for (size_t i = 0; (key = iosr_settings_key(i)); i++) {
    char name[64], def[32];
    size_t j = 0;
    for (; key[j] && j < sizeof name - 1; j++) name[j] = (char)toupper((unsigned char)key[j]);
    name[j] = 0;
    printf("option IOSR_%s %s %s\n", name, iosr_settings_default(i, def, sizeof def),
           iosr_settings_runtime(key) == 1 ? "yes" : "no");
  }
  int documented;
  for (size_t i = 0; (key = iosr_env_other(i, &documented)); i++)
    printf("other IOSR_%s %s\n", key, documented ? "documented" : "internal");
  return 0;
}
