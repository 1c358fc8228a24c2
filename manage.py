#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "subtlebench.settings")
    if not os.getenv("DATABASE_URL") or not os.getenv("CELERY_BROKER_URL"):
        # No services configured: use (and if needed start) the embedded ones under var/.
        from devtools.localservices import ForeignServer, ensure_started

        try:
            ensure_started()
        except ForeignServer as error:
            sys.exit(f"manage.py: {error}")
    if not os.getenv("SITE_URL"):
        # Links printed here (create_study's invites) use the address a running `make run` serves on.
        from devtools.localservices import site_url_running

        served = site_url_running()
        if served:
            os.environ["SITE_URL"] = served
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
