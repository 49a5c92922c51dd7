# syntax=docker/dockerfile:1
#
# One image for the bot and the workers.
#
#   docker run … IMAGE                    → warroom serve: the Slack bot; without REDIS_URL also
#                                           the in-process worker, local sandboxes and SQLite
#   docker run … IMAGE warroom worker     → Dramatiq worker processes for REDIS_URL
#
# Local sandboxes are bubblewrap jails: the container must be allowed to create user
# namespaces with their own hostname and proc (docker run --security-opt seccomp=unconfined
# --security-opt apparmor=unconfined --security-opt systempaths=unconfined; or
# WARROOM_SANDBOX_PROVIDER=blaxel). A step may run a 10-minute command: give the container
# time to finish it on stop (docker stop -t 660, compose stop_grace_period: 11m).

# The base image: Python 3.11 with pip on Debian bookworm. CI builds with a stand-in made by
# debootstrap (.ci/image), since it reaches no image registry.
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# bubblewrap: the local sandbox jail; ripgrep: Grep inside sandboxes; tini: PID 1 (see below).
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap ripgrep tini \
    && rm -rf /var/lib/apt/lists/*

# The service runs as an unprivileged user that owns only its data directory.
RUN groupadd --system --gid 10001 warroom \
    && useradd --system --uid 10001 --gid warroom --create-home --home-dir /home/warroom warroom \
    && mkdir /data \
    && chown warroom:warroom /data

WORKDIR /app
COPY pyproject.toml requirements.lock README.md manifest.yml ./
COPY bot ./bot
COPY harness ./harness
COPY memory_store ./memory_store
COPY sandbox_client ./sandbox_client
# The locked versions of the runtime dependencies (the lock's dev tools are not installed).
RUN pip install -c requirements.lock .

USER warroom
ENV WARROOM_DATA_DIR=/data
VOLUME ["/data"]
# HTTP mode's Slack endpoint (WARROOM_SLACK_MODE=http); Socket Mode needs no port.
EXPOSE 3000

# Signals: tini is PID 1 and forwards SIGTERM to its one child only (no -g: never to the
# process group). That child is `warroom`, and `warroom worker` execs the Dramatiq CLI in
# place (same PID), so the Dramatiq parent receives SIGTERM alone and lets each worker
# process finish its running step before exiting (a SIGTERM to the whole group does the same:
# a worker process passes on only its first stop signal). tini also reaps zombies
# (bubblewrap's).
ENTRYPOINT ["tini", "--"]
CMD ["warroom", "serve"]

# Healthy while the database (and Redis, when REDIS_URL is set) answer; true of a worker's
# container as much as the bot's. `warroom doctor` (without --quick) checks everything.
HEALTHCHECK --interval=30s --timeout=30s --start-period=60s --retries=3 \
    CMD ["warroom", "doctor", "--quick"]
