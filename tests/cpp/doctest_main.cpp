// The one doctest main, compiled once into a static library that every C++ test links.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
