#!/bin/sh
# Generate configure and Makefile.in from configure.ac and Makefile.am.
exec autoreconf -ivf "$@"
