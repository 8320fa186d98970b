#ifndef LIVEDISPATCH_CRDKAFKA_SHIM_H
#define LIVEDISPATCH_CRDKAFKA_SHIM_H
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#endif
