# One image for web, worker and beat; the gpu-worker builds it with REQUIREMENTS=requirements-gpu.txt.
FROM python:3.11-slim
ARG REQUIREMENTS=requirements.txt
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /app
COPY requirements.txt requirements-gpu.txt ./
RUN pip install --no-cache-dir -r ${REQUIREMENTS}
COPY . .
# collectstatic loads the settings, which require these in production; it opens no database.
RUN DEBUG=false SECRET_KEY=collectstatic-only DATABASE_URL=postgresql://collectstatic-only@localhost/none \
    CELERY_BROKER_URL=redis://collectstatic-only/0 \
    python manage.py collectstatic --no-input
RUN useradd --create-home app && mkdir -p /data/media /data/exports && chown app /data/media /data/exports
USER app
EXPOSE 8000
