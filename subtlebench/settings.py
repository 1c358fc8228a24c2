"""Settings for SubtleBench Studio, read from environment variables with defaults that run locally."""

from __future__ import annotations

import os
import re
import sys
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

from benchmark.licenses import license_problem
from subtlebench.keybindings import parse_key_bindings

BASE_DIR = Path(__file__).resolve().parent.parent


def envbool(name: str, default: str) -> bool:
    return os.getenv(name, default).strip().lower() in ("1", "true", "yes", "on")


def envint(name: str, default: str) -> int:
    return int(os.getenv(name, default))


def envfloat(name: str, default: str) -> float:
    return float(os.getenv(name, default))


def envlist(name: str, default: str) -> list[str]:
    """A list separated by commas (or spaces): host names and origins hold ":" (https://host, [::1])."""
    return os.getenv(name, default).replace(",", " ").split()


def envpaths(name: str, default: str) -> list[str]:
    """Folders separated by ":" like PATH."""
    return [item for item in os.getenv(name, default).split(os.pathsep) if item]


def statement_timeout_ms() -> int:
    if sys.argv[1:2] == ["migrate"]:
        return 0
    return int(envfloat("DB_STATEMENT_TIMEOUT_SECONDS", "300") * 1000)


def database_from_url(url: str) -> dict:
    """Turn postgresql://user:password@host:port/name?host=/socket/dir into a DATABASES entry."""
    parsed = urlparse(url)
    if parsed.scheme not in ("postgres", "postgresql"):
        raise ImproperlyConfigured(f"DATABASE_URL must be a postgresql:// URL, got {parsed.scheme!r}")
    query = parse_qs(parsed.query)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parsed.path.lstrip("/")) or "postgres",
        "USER": unquote(parsed.username or "postgres"),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": query.get("host", [parsed.hostname or ""])[0],
        "PORT": str(parsed.port or ""),
        "CONN_MAX_AGE": envint("DB_CONN_MAX_AGE", "0"),
        "OPTIONS": {
            # A server that accepts the connection and never answers (stopped, behind a dropped route) fails the
            # connection within this many seconds instead of hanging the request or task that asked.
            "connect_timeout": envint("DB_CONNECT_TIMEOUT_SECONDS", "5"),
            # The server ends any one statement that runs longer (0: never). `manage.py migrate` runs without it:
            # a migration that rewrites a large table is one long statement, not a hung one.
            "options": f"-c statement_timeout={statement_timeout_ms()}",
        },
    }


DEBUG = envbool("DEBUG", "True")
SECRET_KEY = os.getenv("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. With DEBUG off it is required: set SECRET_KEY to a long random string."
        )
    SECRET_KEY = "insecure-local-development-key-do-not-use-in-production"

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "*" if DEBUG else "localhost")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")
PORT = envint("PORT", "8000")
SITE_URL = os.getenv("SITE_URL", f"http://localhost:{PORT}")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "axes",
    "template_partials",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "subtlebench",
    "annotator",
    "evaluation",
    "api",
]
if DEBUG:
    # Demo data (`seed_demo`, used by `make run`): never in a production deployment.
    INSTALLED_APPS.append("demo")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "subtlebench.middleware.NoStoreMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "subtlebench.middleware.ControlCharacterMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last: it turns a lockout that a login view (page or /api/token/) recorded into the lockout answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "subtlebench.urls"
WSGI_APPLICATION = "subtlebench.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "annotator.context_processors.site",
            ],
        },
    },
]

VAR_DIR = Path(os.getenv("VAR_DIR", BASE_DIR / "var"))
# No default: the embedded servers of a checkout have ports of their own (derived from its var/), and manage.py,
# `make run` and `make test` set both URLs after starting them (devtools/localservices.py).
SERVICES_HINT = (
    "manage.py, make run and make test set it after starting this checkout's embedded servers; any other command"
    " runs with them as `python -m devtools.localservices -- COMMAND`."
)
DATABASE_URL = os.getenv("DATABASE_URL", "")
if not DATABASE_URL:
    raise ImproperlyConfigured(
        f"DATABASE_URL is not set: postgresql://user:password@host:port/name. In development, {SERVICES_HINT}"
    )
DATABASES = {"default": database_from_url(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Axes first: it refuses a locked-out username+IP before the password is even checked.
# Then the user with its roles in one query (subtlebench.auth); ModelBackend last, for the sessions it logged in before.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "subtlebench.auth.RolesBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Django's database sessions, each request's read one written-out query (subtlebench.sessions).
SESSION_ENGINE = "subtlebench.sessions"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.getenv("STATIC_ROOT", BASE_DIR / "staticfiles"))
MEDIA_URL = "media/"
MEDIA_ROOT = Path(os.getenv("MEDIA_ROOT", VAR_DIR / "media"))

# Storage: a local folder by default; an S3 bucket (or any S3-protocol server) when S3_BUCKET is set.
S3_BUCKET = os.getenv("S3_BUCKET", "")
S3_ENDPOINT_URL = os.getenv("S3_ENDPOINT_URL", "")
S3_REGION = os.getenv("S3_REGION", "us-east-1")
S3_ACCESS_KEY_ID = os.getenv("S3_ACCESS_KEY_ID", "")
S3_SECRET_ACCESS_KEY = os.getenv("S3_SECRET_ACCESS_KEY", "")
S3_PREFIX = os.getenv("S3_PREFIX", "media")
S3_URL_EXPIRY = envint("S3_URL_EXPIRY", "3600")
if S3_BUCKET:
    default_storage = {"BACKEND": "subtlebench.storage.S3Storage"}
else:
    default_storage = {"BACKEND": "django.core.files.storage.FileSystemStorage"}
STORAGES = {
    "default": default_storage,
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# Uploads: videos can be large, but not unbounded.
MAX_UPLOAD_BYTES = envint("MAX_UPLOAD_BYTES", str(2 * 1024**3))
FILE_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024**2
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024**2

# Folders that imports (videos, manifests, pair datasets) may read from.
IMPORT_ROOTS = [Path(p).resolve() for p in envpaths("IMPORT_ROOTS", str(VAR_DIR / "imports"))]

# Image collections uploaded from the browser (a zip or a folder): where they land, inside IMPORT_ROOTS ("" turns
# uploads off: the page says so), and the bounds on an upload and on a zip's unpacked content. With S3_BUCKET set
# they go to the bucket instead (every worker reads it); the setting still says whether uploads are allowed.
COLLECTION_UPLOAD_DIR = os.getenv("COLLECTION_UPLOAD_DIR", str(IMPORT_ROOTS[0] / "uploads" if IMPORT_ROOTS else ""))
COLLECTION_UPLOAD_MAX_BYTES = envint("COLLECTION_UPLOAD_MAX_BYTES", str(2 * 1024**3))
COLLECTION_UPLOAD_MAX_UNPACKED_BYTES = envint("COLLECTION_UPLOAD_MAX_UNPACKED_BYTES", str(4 * 1024**3))
COLLECTION_UPLOAD_MAX_FILES = envint("COLLECTION_UPLOAD_MAX_FILES", "10000")
if COLLECTION_UPLOAD_DIR:
    _upload_dir = Path(COLLECTION_UPLOAD_DIR).resolve()
    if not any(_upload_dir == root or _upload_dir.is_relative_to(root) for root in IMPORT_ROOTS):
        raise ImproperlyConfigured(f"COLLECTION_UPLOAD_DIR {_upload_dir} must lie inside one of IMPORT_ROOTS.")
# A folder uploaded from the browser sends one file per image: as many as a collection upload may hold.
DATA_UPLOAD_MAX_NUMBER_FILES = COLLECTION_UPLOAD_MAX_FILES + 10

# --- Limits on what an imported or validated folder may hold (issue 25): checked before anything is decoded, so a
# hostile file is one clear error, never a traceback or a process out of memory.
IMPORT_MAX_IMAGE_PIXELS = envint("IMPORT_MAX_IMAGE_PIXELS", str(100_000_000))  # width x height, read from the header
IMPORT_MAX_IMAGE_BYTES = envint("IMPORT_MAX_IMAGE_BYTES", str(50 * 1024**2))
IMPORT_MAX_LINE_BYTES = envint("IMPORT_MAX_LINE_BYTES", str(1024**2))  # one line of a .jsonl, a manifest or a card

# Frame sampling.
FRAME_MAX_SIDE = envint("FRAME_MAX_SIDE", "1920")  # 1080p sources keep their detail
THUMBNAIL_MAX_SIDE = envint("THUMBNAIL_MAX_SIDE", "240")
FRAME_JPEG_QUALITY = envint("FRAME_JPEG_QUALITY", "92")
DEFAULT_SAMPLE_EVERY_SECONDS = envfloat("DEFAULT_SAMPLE_EVERY_SECONDS", "1.0")

# Similarity (DINOv3). The current model is a database row (`manage.py check_dinov3 --activate FOLDER`): the web
# process and beat read no DINOV3_* setting. Only the similarity worker and check_dinov3 read these.
# Where the worker reads the active model's weights when not at the folder it was activated from (another mount).
DINOV3_MODEL_DIR = os.getenv("DINOV3_MODEL_DIR", "")
DINOV3_IMAGE_SIZE = envint("DINOV3_IMAGE_SIZE", "224")  # the default input size of check_dinov3 --activate
DINOV3_BATCH_SIZE = envint("DINOV3_BATCH_SIZE", "64")
SIMILARITY_THRESHOLD = envfloat("SIMILARITY_THRESHOLD", "0.8")
NEAR_DUPLICATE_CEILING = envfloat("NEAR_DUPLICATE_CEILING", "0.995")
# A mining job over more images than this is cut into blocks of this many, one unit per block pair (any similarity
# worker takes one); each unit holds two blocks of vectors (50,000 x 1024 float16: 100 MB a block).
MINING_BLOCK_ROWS = envint("MINING_BLOCK_ROWS", "50000")
SUGGESTION_MAX_GAP_SECONDS = envfloat("SUGGESTION_MAX_GAP_SECONDS", "10")

# Work queues: how long a video or caption task stays leased after the last heartbeat or autosave. An expired
# lease is free in every query; nothing sweeps it.
LEASE_MINUTES = envint("LEASE_MINUTES", "15")

# Celery: Redis as broker; the state of long jobs lives in the Job table, not in a result backend.
CELERY_BROKER_URL = os.getenv("CELERY_BROKER_URL", "")
if not CELERY_BROKER_URL:
    raise ImproperlyConfigured(f"CELERY_BROKER_URL is not set: redis://host:port/db. In development, {SERVICES_HINT}")
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
# Pair mining reads every vector of its scope and multiplies them (torch): the similarity worker's work too.
CELERY_TASK_ROUTES = {
    "annotator.tasks.embed_*": {"queue": "similarity"},
    "annotator.tasks.mine_pairs": {"queue": "similarity"},
}
# Redis hands an unacknowledged task to another worker after the visibility timeout: it must exceed the longest
# task's time_limit (the embedding runs, 12 h), or a running task would run twice (tests/operations/test_faults.py
# checks).
# A worker that vanished is found much sooner by its job's heartbeat (JOB_STALE_SECONDS).
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": envint("CELERY_VISIBILITY_TIMEOUT", str(13 * 3600)),
    # A broker that is down answers "connection refused" at once; one that hangs must not hang a request.
    "socket_connect_timeout": 3,
    "socket_timeout": 10,
}
# Queueing follow-up work with the broker down gives up within a second or two: the unit stays pending in the
# database (annotator.models.JobTask) and the sweeper hands it over when the broker is back.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0.2, "interval_step": 0.3, "interval_max": 0.5}
# Workers that come back (issue 17): a worker keeps trying to reach Redis for as long as it is down (at start too),
# and survives losing it with a task in flight (the transport's docstring says why it takes our own).
if urlparse(CELERY_BROKER_URL).scheme in ("redis", "rediss"):
    CELERY_BROKER_TRANSPORT = "subtlebench.celery:RedisTransport"
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# A task in flight is not cancelled when Redis drops: a long export keeps going and its ack reaches Redis once it
# is back (cancelling would requeue it to start over, after the visibility timeout).
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_BEAT_SCHEDULE: dict = {}
# --- Beat's tick and the broker check of queued units (issue 25) ---
# Beat records that it is alive every BEAT_TICK_SECONDS (subtlebench.celery.BeatScheduler); /healthz?deep=1 and the
# jobs page call beat down once its last tick is older than BEAT_STALE_SECONDS.
CELERY_BEAT_SCHEDULER = "subtlebench.celery:BeatScheduler"
BEAT_TICK_SECONDS = envfloat("BEAT_TICK_SECONDS", "15")
BEAT_STALE_SECONDS = envfloat("BEAT_STALE_SECONDS", "180")
# A queued unit no worker started within JOB_BROKER_CHECK_SECONDS is looked for in the broker (its queue lists and
# the unacknowledged set) by each sweep, and sent again when its message is in neither (a broker wiped or restarted
# empty). At once, whatever its age, when the broker lost the sweeper's marker key (FLUSHALL, restart without data).
JOB_BROKER_CHECK_SECONDS = envfloat("JOB_BROKER_CHECK_SECONDS", "30")
# Jobs: a running task beats its unit's heartbeat as it makes progress, and its worker process says every
# JOB_HEARTBEAT_SECONDS which units it still runs (annotator/jobs/liveness.py); a unit with neither for
# JOB_STALE_SECONDS lost its worker and is requeued by the sweeper (every JOB_SWEEP_SECONDS), up to JOB_MAX_ATTEMPTS
# claims, then failed with the reason. A unit the broker accepted but no worker started within JOB_LOST_SECONDS is
# sent again. A unit that meets an outage of the storage, the broker or the database pauses: it is queued again every
# JOB_PAUSE_SECONDS, and fails with the reason once paused for JOB_PAUSE_MAX_SECONDS without progress.
# A bulk action of the data manager can be undone this long after it ran (annotator/datamanager/undo.py).
BULK_UNDO_HOURS = envfloat("BULK_UNDO_HOURS", "24")
JOB_HEARTBEAT_SECONDS = envfloat("JOB_HEARTBEAT_SECONDS", "20")
JOB_STALE_SECONDS = envfloat("JOB_STALE_SECONDS", "300")
JOB_SWEEP_SECONDS = envfloat("JOB_SWEEP_SECONDS", "60")
JOB_MAX_ATTEMPTS = envint("JOB_MAX_ATTEMPTS", "3")
JOB_LOST_SECONDS = envfloat("JOB_LOST_SECONDS", str(3 * 3600))
JOB_PAUSE_SECONDS = envfloat("JOB_PAUSE_SECONDS", "60")
JOB_PAUSE_MAX_SECONDS = envfloat("JOB_PAUSE_MAX_SECONDS", str(6 * 3600))
# Task retries on a database error back off exponentially (with jitter) up to the maximum: 10 retries ride out a
# database restart of several minutes.
TASK_RETRY_BACKOFF_SECONDS = envint("TASK_RETRY_BACKOFF_SECONDS", "5")
TASK_RETRY_BACKOFF_MAX_SECONDS = envint("TASK_RETRY_BACKOFF_MAX_SECONDS", "60")
TASK_MAX_RETRIES = envint("TASK_MAX_RETRIES", "10")
# Clean-up after crashes (every CLEANUP_MINUTES, 0: never): frame files no row references and every temporary
# path the app made (annotator/jobs/scratch.py), once untouched for CLEANUP_GRACE_MINUTES and no live owner
# (an active job with a fresh heartbeat, a running process) holds them.
CLEANUP_MINUTES = envint("CLEANUP_MINUTES", "60")
CLEANUP_GRACE_MINUTES = envfloat("CLEANUP_GRACE_MINUTES", "15")
# --- Temporary files: downloads, S3 staging and the ledger of every temporary path. Empty: VAR_DIR/scratch. Each host
# has its own (nothing another host needs is kept there), and each worker cleans its own host's (annotator/cleanup).
SCRATCH_ROOT = os.getenv("SCRATCH_ROOT", "")
# boto3's attempts per S3 request (its own retries; the export retries a failed upload on top).
S3_MAX_ATTEMPTS = envint("S3_MAX_ATTEMPTS", "5")
if JOB_SWEEP_SECONDS:
    CELERY_BEAT_SCHEDULE["sweep-jobs"] = {
        "task": "annotator.tasks.sweep_jobs",
        "schedule": JOB_SWEEP_SECONDS,
        "options": {"expires": JOB_SWEEP_SECONDS},
    }
if CLEANUP_MINUTES:
    CELERY_BEAT_SCHEDULE["clean-up"] = {
        "task": "annotator.tasks.clean_up",
        "schedule": 60.0 * CLEANUP_MINUTES,
        "options": {"expires": 60.0 * CLEANUP_MINUTES},
    }

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "subtlebench.tokens.ExpiringTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "api.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 100,
    # Anonymous participant endpoints (subtlebench.throttles): per client address, counted in CACHES.
    "DEFAULT_THROTTLE_RATES": {
        "participant": os.getenv("PARTICIPANT_THROTTLE_RATE", "120/min"),
        "participant_join": os.getenv("PARTICIPANT_JOIN_THROTTLE_RATE", "20/min"),
    },
    # Proxies in front of the web server: the client address is taken that many hops from the right of
    # X-Forwarded-For (None: REMOTE_ADDR, no proxy).
    "NUM_PROXIES": envint("PROXY_COUNT", "0") or None,
    # No NUL or other control character in any body (issue 13): DRF's parsers, then a check of every string.
    "DEFAULT_PARSER_CLASSES": ["api.parsers.JSONParser", "api.parsers.FormParser", "api.parsers.MultiPartParser"],
    # Every error answers {"detail": ..., "errors": {field: [...]}}, DRF's own included.
    "EXCEPTION_HANDLER": "api.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "SubtleBench Studio API",
    "DESCRIPTION": "Videos, frames, pairs, captions, studies and jobs of a subtle-difference benchmark.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema names every endpoint and field: for logged-in users (session or token) only.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "CategoryEnum": "api.schema_enums.CATEGORY",
        "DomainEnum": "api.schema_enums.DOMAIN",
        "VideoStatusEnum": "api.schema_enums.VIDEO_STATUS",
        "ReviewStatusEnum": "api.schema_enums.REVIEW_STATUS",
        "JobStatusEnum": "api.schema_enums.JOB_STATUS",
        "FrameEnum": "api.schema_enums.FRAME",
        "ReasoningEffortEnum": "api.schema_enums.REASONING_EFFORT",
        "EditKindEnum": "api.schema_enums.EDIT_KIND",
        "EditRefuseReasonEnum": "api.schema_enums.EDIT_REFUSE_REASON",
        "EditStatusEnum": "api.schema_enums.EDIT_STATUS",
    },
}

if not DEBUG:
    SESSION_COOKIE_SECURE = envbool("SECURE_COOKIES", "True")
    CSRF_COOKIE_SECURE = envbool("SECURE_COOKIES", "True")

# Behind a TLS proxy (docs/operations.md): Django sees plain HTTP, so the proxy's header says what the client used.
# SECURE_PROXY_SSL_HEADER=X-Forwarded-Proto (the header the proxy sets to "https"; unset: no proxy is trusted).
_proxy_ssl_header = os.getenv("SECURE_PROXY_SSL_HEADER", "").strip()
if _proxy_ssl_header:
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_ssl_header.upper().replace("-", "_"), "https")
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", "False")
# /healthz answers over plain HTTP too: health checks probe it from inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", "0")
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", "False")
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", "False")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp): scripts only from our own static files, no inline script, no framing.
# htmx's own indicator <style> is switched off in base.html (htmx-config meta): no inline style element.
_s3_image_sources = []
# Media in a bucket, or source videos imported from one (s3://... on S3_ENDPOINT_URL) with media on a disk: either way
# the browser loads presigned URLs from the endpoint's host.
if S3_BUCKET or S3_ENDPOINT_URL:
    _endpoint = urlparse(S3_ENDPOINT_URL)
    _s3_image_sources = (
        [f"{_endpoint.scheme}://{_endpoint.netloc}"] if _endpoint.netloc else ["https://*.amazonaws.com"]
    )
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        # Style sheets only from our static files; style="" attributes stay (progress bars set their width).
        "style-src": ["'self'"],
        "style-src-attr": ["'unsafe-inline'"],
        # Media in S3 are presigned URLs on the bucket's host: the endpoint's origin, or AWS's.
        "img-src": ["'self'", "data:", "blob:", *_s3_image_sources, *envlist("CSP_IMG_SOURCES", "")],
        # The workbench plays the source video: served here (local media) or a presigned URL on the bucket's host.
        "media-src": ["'self'", "blob:", *_s3_image_sources],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'", *envlist("CSP_FORM_ACTIONS", "")],
        "frame-ancestors": ["'none'"],
    }
}

# Caches: DRF's throttles count requests here, shared by every web worker process (Redis, like the broker).
CACHE_URL = os.getenv("CACHE_URL", CELERY_BROKER_URL)
# --- Fail-open cache (issue 25) ---
# The cache fails open (subtlebench.cache): with Redis down or out of memory a read misses, a write is dropped and the
# throttles let requests through; after a failure it is not asked for CACHE_RETRY_SECONDS. Short socket timeouts: a
# Redis that hangs must not hang a participant's request.
CACHE_RETRY_SECONDS = envfloat("CACHE_RETRY_SECONDS", "5")
CACHES = {
    "default": {
        "BACKEND": "subtlebench.cache.FailOpenRedisCache",
        "LOCATION": CACHE_URL,
        "KEY_PREFIX": "cache",
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
    }
}
# --- The health check (issue 25) ---
# /healthz?deep=1 (beat, workers per queue, storage, waiting job units, with details) answers staff users and callers
# sending `Authorization: Bearer <HEALTHZ_TOKEN>` (unset: staff only); the plain /healthz is open and says no more
# than "ok"/"down" per part. Workers are asked with a broadcast that waits HEALTH_WORKER_TIMEOUT_SECONDS for replies.
HEALTHZ_TOKEN = os.getenv("HEALTHZ_TOKEN", "")
HEALTH_WORKER_TIMEOUT_SECONDS = envfloat("HEALTH_WORKER_TIMEOUT_SECONDS", "1")
# The database and the broker are asked at once; a part that has not answered within this many seconds is down (a
# PostgreSQL or Redis that hangs gets a 503 answered in time, not a load balancer's own timeout).
HEALTH_CHECK_TIMEOUT_SECONDS = envfloat("HEALTH_CHECK_TIMEOUT_SECONDS", "3")

# API tokens (account page, /api/tokens/): every token expires. The expiry a token gets when none is asked for (a
# token from before expiries were required expires this long after it was made), and the longest.
API_TOKEN_DEFAULT_DAYS = envint("API_TOKEN_DEFAULT_DAYS", "90")
API_TOKEN_MAX_DAYS = envint("API_TOKEN_MAX_DAYS", "365")
if not 1 <= API_TOKEN_DEFAULT_DAYS <= API_TOKEN_MAX_DAYS:
    raise ImproperlyConfigured(
        f"API_TOKEN_DEFAULT_DAYS must be from 1 to API_TOKEN_MAX_DAYS ({API_TOKEN_MAX_DAYS}): every token expires."
    )

# Failed logins (django-axes), on the login page, the admin and /api/token/: after AXES_FAILURE_LIMIT failures
# for one username from one address, that pair is locked out for AXES_COOLOFF_MINUTES (each new try restarts it).
AXES_FAILURE_LIMIT = envint("AXES_FAILURE_LIMIT", "5")
AXES_COOLOFF_TIME = timedelta(minutes=envint("AXES_COOLOFF_MINUTES", "15"))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "subtlebench.views.lockout"
AXES_CLIENT_IP_CALLABLE = "subtlebench.security.client_ip"
# Its start-up banner would open every management command's output (and every test run); lockouts still log.
AXES_VERBOSE = False

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.getenv("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}

# Human-baseline studies (evaluation).
STUDY_LEASE_MINUTES = envint("STUDY_LEASE_MINUTES", "20")
STUDY_IMAGE_URL_MAX_AGE = envint("STUDY_IMAGE_URL_MAX_AGE", "1800")
# A participant API request carries an option, a time and a key: a body of more bytes is refused (413) unread.
PARTICIPANT_API_MAX_BODY_BYTES = envint("PARTICIPANT_API_MAX_BODY_BYTES", "4096")
STUDY_TOO_FAST_SECONDS = envfloat("STUDY_TOO_FAST_SECONDS", "1.5")
# A finished session whose time from consent to its last answer is under this many seconds per answer it gave is
# flagged too fast as a whole (its answers stay counted, marked); 0: no session flag.
STUDY_SESSION_MIN_SECONDS_PER_ITEM = envfloat("STUDY_SESSION_MIN_SECONDS_PER_ITEM", "3")
STUDY_PRACTICE_COUNT = envint("STUDY_PRACTICE_COUNT", "3")
# Sessions one browser (its device cookie) may start through a study's open link, in the whole study; 0: no limit.
STUDY_OPEN_JOINS_PER_DEVICE = envint("STUDY_OPEN_JOINS_PER_DEVICE", "1")
# Sessions one client address may start through a study's open link within the window; 0: no limit.
STUDY_OPEN_JOINS_PER_ADDRESS = envint("STUDY_OPEN_JOINS_PER_ADDRESS", "2")
STUDY_OPEN_JOIN_WINDOW_MINUTES = envint("STUDY_OPEN_JOIN_WINDOW_MINUTES", "1440")
STUDY_REDIRECT_SECONDS = envint("STUDY_REDIRECT_SECONDS", "10")  # the end page's countdown to the completion URL
# Pair picking and review.
PAIRS_PER_CATEGORY_TARGET = envint("PAIRS_PER_CATEGORY_TARGET", "1000")
# Captions (issue 5): length bounds of a caption and the quality signals.
CAPTION_MIN_CHARS = envint("CAPTION_MIN_CHARS", "20")
CAPTION_MAX_CHARS = envint("CAPTION_MAX_CHARS", "600")
CAPTION_SHORT_WORDS = envint("CAPTION_SHORT_WORDS", "6")
CAPTION_NEAR_DUPLICATE_JACCARD = envfloat("CAPTION_NEAR_DUPLICATE_JACCARD", "0.9")
CAPTION_NEAR_DUPLICATE_SCAN = envint("CAPTION_NEAR_DUPLICATE_SCAN", "2000")
# Similarity (DINOv3) worker: where the model runs ("cuda" on the GPU worker; also check_dinov3's default
# device). The fingerprint names the dtype (bf16 on CUDA, fp32 on CPU): a worker whose device does not match the
# active model's refuses to embed.
DINOV3_DEVICE = os.getenv("DINOV3_DEVICE", "cpu")
DINOV3_DECODE_THREADS = envint("DINOV3_DECODE_THREADS", "0")  # 0: one per CPU core but one
# Seconds one image's read and decode may take before it fails alone (a hung mount or object store).
DINOV3_DECODE_TIMEOUT = envint("DINOV3_DECODE_TIMEOUT", "60")
# Beat queues a catch-up of pending embeddings and stale pairs this often (0: never).
SIMILARITY_CATCH_UP_MINUTES = envint("SIMILARITY_CATCH_UP_MINUTES", "10")
if SIMILARITY_CATCH_UP_MINUTES:
    CELERY_BEAT_SCHEDULE["similarity-catch-up"] = {
        "task": "annotator.tasks.embed_pending",
        "schedule": 60.0 * SIMILARITY_CATCH_UP_MINUTES,
        # Without a GPU worker the queue would only grow: a catch-up nobody took in time is dropped.
        "options": {"expires": 60.0 * SIMILARITY_CATCH_UP_MINUTES},
    }
# Export.
# Where exports started from the /exports/ page are written (a folder name below it), and their zips. With media in
# S3 they go to the bucket instead, under EXPORT_S3_PREFIX, where every host reads them (a worker's disk is its own).
EXPORT_ROOT = Path(os.getenv("EXPORT_ROOT", VAR_DIR / "exports"))
EXPORT_S3_PREFIX = os.getenv("EXPORT_S3_PREFIX", "exports").strip("/")
if not EXPORT_S3_PREFIX or EXPORT_S3_PREFIX == S3_PREFIX.strip("/"):
    raise ImproperlyConfigured("EXPORT_S3_PREFIX: a key prefix of its own in the bucket, not empty and not S3_PREFIX.")
# Image copies in flight at once during an export (file creation is latency-bound; threads overlap it).
EXPORT_COPY_THREADS = envint("EXPORT_COPY_THREADS", "4")
# The dataset card's name (pretty_name and title), and the license (a Hub license id) of the items the app draws
# itself (source synthetic); each other source's license is its own (SourceLicense). A bad license fails at start.
BENCHMARK_NAME = os.getenv("BENCHMARK_NAME", "SubtleBench Studio export").strip() or "SubtleBench Studio export"
BENCHMARK_LICENSE = os.getenv("BENCHMARK_LICENSE", "unknown").strip()
if license_problem(BENCHMARK_LICENSE):
    raise ImproperlyConfigured(f"BENCHMARK_LICENSE: {license_problem(BENCHMARK_LICENSE)}.")
# Model evaluation (evaluation/runs/): request retries on 429/5xx/connection errors with exponential backoff and
# jitter (BACKOFF * 2^attempt, at most BACKOFF_MAX, or the server's Retry-After), the request parameters, our prompt
# texts (a JSON file {"system": ..., "user": ...} replaces them).
MODEL_EVAL_RETRIES = envint("MODEL_EVAL_RETRIES", "4")
MODEL_EVAL_BACKOFF_SECONDS = envfloat("MODEL_EVAL_BACKOFF_SECONDS", "1")
MODEL_EVAL_BACKOFF_MAX_SECONDS = envfloat("MODEL_EVAL_BACKOFF_MAX_SECONDS", "30")
MODEL_EVAL_TEMPERATURE = envfloat("MODEL_EVAL_TEMPERATURE", "0.5")
MODEL_EVAL_MAX_TOKENS = envint("MODEL_EVAL_MAX_TOKENS", "1024")
MODEL_EVAL_PROMPT_FILE = os.getenv("MODEL_EVAL_PROMPT_FILE", "")
# The most bytes of one reply read from a model endpoint (any request: test, run, judge, extraction, drafting); a
# larger reply fails as "reply too large" and is not read further, so a process holds at most this much of it.
MODEL_REPLY_MAX_BYTES = max(1024, envint("MODEL_REPLY_MAX_BYTES", str(8 * 1024 * 1024)))
# --- Models that draft (issue 28): the workbench's drafts and background answers wait this long at most for a model;
# the drafting prompt's texts may come from a file.
MODEL_DRAFT_TIMEOUT_SECONDS = envint("MODEL_DRAFT_TIMEOUT_SECONDS", "60")
MODEL_DRAFT_PROMPT_FILE = os.getenv("MODEL_DRAFT_PROMPT_FILE", "")
# --- Model runs when the endpoint fails (issue 25): a run pauses after MODEL_EVAL_PAUSE_AFTER_FAILURES requests in a
# row fail for the endpoint's sake (unreachable, timeout, 5xx, 429) or when its check before sending finds it down;
# its unit is queued again every MODEL_EVAL_PAUSE_SECONDS and resumes when the endpoint answers; after
# MODEL_EVAL_PAUSE_MAX_SECONDS down (0: never pause) the run fails with the reason. A failed item is asked again,
# MODEL_EVAL_ITEM_TRIES times at most per job. A run with failed items ends "incomplete", or "failed" when more than
# MODEL_EVAL_FAILED_SHARE of its items failed. A running run reads its cancel flag every
# MODEL_EVAL_CANCEL_CHECK_SECONDS.
MODEL_EVAL_PAUSE_AFTER_FAILURES = envint("MODEL_EVAL_PAUSE_AFTER_FAILURES", "8")
# A run also pauses after this many requests in a row are refused (HTTP 4xx) for the same reason: a refusal of the
# request's shape (a field the endpoint does not take) repeats for every item.
MODEL_EVAL_PAUSE_AFTER_REFUSALS = max(1, envint("MODEL_EVAL_PAUSE_AFTER_REFUSALS", "3"))
MODEL_EVAL_PAUSE_SECONDS = envfloat("MODEL_EVAL_PAUSE_SECONDS", "60")
MODEL_EVAL_PAUSE_MAX_SECONDS = envfloat("MODEL_EVAL_PAUSE_MAX_SECONDS", str(6 * 3600))
MODEL_EVAL_ITEM_TRIES = max(1, envint("MODEL_EVAL_ITEM_TRIES", "3"))
MODEL_EVAL_FAILED_SHARE = envfloat("MODEL_EVAL_FAILED_SHARE", "0.5")
MODEL_EVAL_CANCEL_CHECK_SECONDS = envfloat("MODEL_EVAL_CANCEL_CHECK_SECONDS", "1")
# --- end of model runs when the endpoint fails
# The hosts a model endpoint may name (empty: any public host; loopback, private, link-local and reserved addresses
# are refused at registration and again at each connection). An endpoint's API key is either stored encrypted with
# MODEL_API_KEY_ENCRYPTION_KEY (Fernet keys separated by commas: the first encrypts, every one decrypts, so a key is
# rotated by putting the new one first) or read from a variable whose name starts with MODEL_API_KEY_ENV_PREFIX:
# never any other variable of the worker (SECRET_KEY, DATABASE_URL, ...).
MODEL_ENDPOINT_HOSTS = [host.lower().rstrip(".") for host in envlist("MODEL_ENDPOINT_HOSTS", "")]
MODEL_API_KEY_ENV_PREFIX = os.getenv("MODEL_API_KEY_ENV_PREFIX", "SUBTLEBENCH_MODEL_KEY_").strip()
if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{3,}", MODEL_API_KEY_ENV_PREFIX):
    raise ImproperlyConfigured(
        "MODEL_API_KEY_ENV_PREFIX must be at least 4 letters, digits or _ (e.g. SUBTLEBENCH_MODEL_KEY_): "
        "it is what keeps the worker's other variables out of reach."
    )
# Which hosts each key variable may be sent to (subtlebench.keybindings): VARIABLE=host[:port] entries, the
# operator's; a variable bound to no host, or an endpoint on another host, is refused and its key never sent.
MODEL_KEY_BINDINGS = parse_key_bindings(os.getenv("MODEL_KEY_BINDINGS", ""), MODEL_API_KEY_ENV_PREFIX)
MODEL_API_KEY_ENCRYPTION_KEY = envlist("MODEL_API_KEY_ENCRYPTION_KEY", "")
if MODEL_API_KEY_ENCRYPTION_KEY:
    from cryptography.fernet import Fernet

    try:
        for _key in MODEL_API_KEY_ENCRYPTION_KEY:
            Fernet(_key)
    except ValueError:
        raise ImproperlyConfigured(
            "MODEL_API_KEY_ENCRYPTION_KEY: each key is 32 url-safe base64-encoded bytes, as "
            "`python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'` prints."
        ) from None
