// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>
