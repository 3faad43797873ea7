/* SPDX-License-Identifier: BSD-2-Clause */
/* hmemloop-check --settings: the settings list (hml_config.h) as the
 * wrapper's --help prints it, as hmemloop(7)'s roff, as README's table,
 * or its names. In help, `x` marks a literal. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "hml_config.h"

/* Help text: literals plain, words wrapped at 76 columns under a
 * 6-column indent. */
static void text(const char *s)
{
	int col = 0, len;

	while (*s) {
		s += strspn(s, " ");
		len = strcspn(s, " ");
		if (!col || col + 1 + len > 76) {
			printf("%s      ", col ? "\n" : "");
			col = 6;
		} else {
			putchar(' ');
			col++;
		}
		for (int i = 0; i < len; i++)
			if (s[i] != '`')
				putchar(s[i]);
		col += len;
		s += len;
	}
	putchar('\n');
}

/* roff: literals bold, hyphens and backslashes escaped. */
static void roff(const char *s)
{
	bool lit = false;

	for (; *s; s++) {
		if (*s == '`')
			printf((lit = !lit) ? "\\fB" : "\\fR");
		else if (*s == '-')
			printf("\\-");
		else if (*s == '\\')
			printf("\\e");
		else
			putchar(*s);
	}
}

static void values(const struct hml_setting *v, const char *sep)
{
	const char *w = v->values;

	if (!w[0])
		w = "PATH";
	for (; *w; w++)
		if (*w == ' ')
			fputs(sep, stdout);
		else
			putchar(*w);
}

int settings_doc(const char *format)
{
	const struct hml_setting *v;

	if (!strcmp(format, "markdown"))
		printf("| variable | default | meaning |\n| --- | --- | --- |\n");
	for (v = hml_settings; v < hml_settings + hml_nsettings; v++) {
		if (!strcmp(format, "names")) {
			printf("%s\n", v->name);
		} else if (!strcmp(format, "text")) {
			printf("  %s=", v->name);
			values(v, "|");
			printf(" (default %s)\n", v->def);
			text(v->help);
		} else if (!strcmp(format, "man")) {
			printf(".TP\n.B %s\n\\fB", v->name);
			values(v, "\\fR|\\fB");
			printf("\\fR (default \\fB");
			roff(v->def);
			printf("\\fR)\n.br\n");
			roff(v->help);
			printf(".\n");
		} else if (!strcmp(format, "markdown")) {
			printf("| `%s` | `%s` | %s |\n", v->name, v->def, v->help);
		} else {
			fprintf(stderr, "hmemloop-check: no format %s\n", format);
			return 2;
		}
	}
	return 0;
}
