"""Settings of the EchoMQ Django example: the smallest project that enqueues from a view.

``ECHOMQ_URL`` names the Valkey server; unset, EchoMQ uses its embedded server (the data dir's,
shared by ``runserver`` and the worker). ``ECHOMQ_KEEP_COMPLETED_S`` keeps finished jobs
visible to ``/jobs/<id>/`` for that long.
"""

import os

BASE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-a-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

INSTALLED_APPS = ["shop"]
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
ROOT_URLCONF = "mysite.urls"
DATABASES: dict[str, dict[str, str]] = {}  # the example keeps its state in EchoMQ only
USE_TZ = True
TIME_ZONE = "UTC"  # Django sets the process's TZ from this (its default is America/Chicago)

ECHOMQ_URL = os.environ.get("ECHOMQ_URL")  # None: the embedded server
ECHOMQ_KEEP_COMPLETED_S = int(os.environ.get("ECHOMQ_KEEP_COMPLETED_S", "3600"))
