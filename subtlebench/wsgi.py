"""WSGI entry point (gunicorn subtlebench.wsgi, and `manage.py runserver`), which refuses to start on a database or a
broker that does not answer."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "subtlebench.settings")
application = get_wsgi_application()

from subtlebench.celery import start_check  # noqa: E402 (the settings are configured above)

# A web process on a wrong DATABASE_URL or CELERY_BROKER_URL would boot and answer every page with a 500; it stops
# here instead, with the setting named. An exception, not SystemExit: gunicorn halts on a worker whose boot raised,
# but boots again, forever, a worker that exits.
start_check("the web")
