# Man pages: merak(1) and merak-CMD(1) for each subcommand, generated from
# --help by help2man (`make man`, a maintainer step: man/mkman.sh) and
# committed, so that a build needs no help2man.
dist_man_MANS = man/merak.1 man/merak-models.1 man/merak-model.1 man/merak-sched.1 man/merak-sim.1 \
	man/merak-plan.1 man/merak-run.1 man/merak-profile.1 man/merak-plot.1 man/merak-trace.1 \
	man/merak-version.1
EXTRA_DIST += man/mkman.sh
man: merak$(EXEEXT)
	$(AM_V_GEN)HELP2MAN='$(HELP2MAN)' $(SHELL) $(srcdir)/man/mkman.sh ./merak$(EXEEXT) $(srcdir)/man \
	  '$(PACKAGE_VERSION)'
.PHONY: man
