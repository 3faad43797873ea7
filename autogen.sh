#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Generate configure and Makefile.in from configure.ac and Makefile.am.
exec autoreconf -ivf "$@"
