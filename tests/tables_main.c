/* SPDX-License-Identifier: BSD-2-Clause */
int tables_main(int argc, char **argv);

int main(int argc, char **argv)
{
	return tables_main(argc, argv);
}
