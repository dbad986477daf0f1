# The image a docker or kubernetes work pool runs: the locked dependencies (installed with uv, as `make install`
# does) and this package, the code in the working directory, so deployments need no pull step.
#   docker build -t registry.example/fleet-maintenance:1 .
# Pools and job variables: README, "Scaling out with work pools"; prefect.yaml has the deployments, commented.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    UV_PYTHON_DOWNLOADS=never \
    PREFECT_SERVER_ANALYTICS_ENABLED=false \
    FLEET_REPORT_DIR=/reports

WORKDIR /opt/fleet-maintenance
COPY requirements.lock pyproject.toml ./
RUN pip install --no-cache-dir "$(grep -m1 '^uv==' requirements.lock | cut -d' ' -f1)" \
 && uv pip install --system --no-cache --require-hashes -r requirements.lock
COPY . .
# Editable: the templates and the flows' entrypoints (flows/nightly.py, ...) stay where the deployments name them.
RUN uv pip install --system --no-cache --no-deps -e . \
 && useradd --create-home --uid 10001 fleet \
 && mkdir -p /reports && chown fleet /reports
USER fleet
