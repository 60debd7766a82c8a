/* A decoy of one llama.cpp library of the DLC, in the stand-in base's /opt/llama.cpp/bin (tests/image).
 * The base's LD_LIBRARY_PATH starts there; if the dynamic loader ever hands this file to the decision adapter
 * instead of the adapter's own build, the process says so and aborts, and the image test fails loudly. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((constructor)) static void refuse_to_be_loaded(void) {
    fputs("DECOY " DECOY_NAME " of the stand-in DLC base was loaded: the adapter must only use its own "
          "llama.cpp libraries\n", stderr);
    abort();
}
