# One image for the whole stack: Drover nodes, the migration job, and the Spark standalone
# masters and workers. Spark comes from the pyspark wheel (SPARK_HOME is the installed package),
# so PySpark drivers that run on the workers in cluster mode find the same Python, pyspark and
# pipelines as the nodes that submit them.
#
#   docker build -t drover:dev .          (docker-compose.yml builds it for you)
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps tini \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /opt/drover

# Dependencies first, so a source change does not reinstall pyspark (~490 MB) and ray.
COPY pyproject.toml ./
RUN python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt

COPY . .
RUN pip install --no-deps . \
    && useradd --system --create-home --uid 10001 drover \
    && mkdir -p /data/drover /data/checkpoints /data/spark-work /data/secrets \
    && chown -R drover /data

ENV SPARK_HOME=/usr/local/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=python3 \
    DROVER_DATA_DIR=/data/drover
ENV PATH="${SPARK_HOME}/bin:${PATH}"

USER drover
EXPOSE 8000
ENTRYPOINT ["tini", "--"]
CMD ["drover", "node", "run"]
