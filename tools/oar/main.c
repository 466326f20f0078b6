/* The oar command (placeholder dispatcher, filled in below). */
#include "oar.h"
#include <stdio.h>
int main(void) { printf("oar %s\n", oar_version()); return 0; }
