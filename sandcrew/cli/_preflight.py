"""Checks before the first model call: a wrong setting fails in seconds, as what it is.

Docker reachable, the image there, the model endpoint answering and serving the model.
Configuration mistakes raise :class:`ConfigurationError` (exit 2); an unreachable engine or
endpoint raises :class:`InfrastructureError` (exit 3).
"""

from __future__ import annotations

import asyncio

import openai

from sandcrew.agents import ModelEndpoint
from sandcrew.crew import CrewSettings
from sandcrew.errors import ConfigurationError, ErrorCode, ImageNotFoundError, InfrastructureError
from sandcrew.sandbox import SandboxConfig
from sandcrew.sandbox.host import connect_docker

_LISTED_MODELS_SHOWN = 5


def check_before_solving(settings: CrewSettings, *, sandbox_here: bool = True) -> None:
    """Every check a crew needs before it spends a model call.

    ``sandbox_here=False``: the sandboxes run elsewhere (a cluster's nodes check their own).
    """
    settings.endpoint.api_key_value()  # no model configured at all
    if sandbox_here:
        check_sandbox_image(settings.sandbox, "python")
    models = {settings.model_for(role) for role in ("admin", "coder", "reviewer")}
    asyncio.run(check_endpoint(settings.endpoint, sorted(models)))


def check_sandbox_image(config: SandboxConfig, language: str) -> None:
    """Docker answers and has the image runs of ``language`` use."""
    import docker.errors

    client = connect_docker(timeout=config.docker_timeout)
    tag = config.images.get(language)
    if tag is None:
        raise ConfigurationError(f"no sandbox image is set for {language}")
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        # A setting to fix before anything runs (exit 2), said as a run would say it.
        raise ConfigurationError(str(ImageNotFoundError(tag))) from None
    except docker.errors.APIError as error:
        raise InfrastructureError(
            f"Docker could not look up the image {tag}: {error.explanation or error}",
            code=ErrorCode.DOCKER_UNAVAILABLE,
        ) from None
    finally:
        client.close()


async def check_endpoint(endpoint: ModelEndpoint, models: list[str]) -> None:
    """The endpoint answers, accepts the key and (where it lists models) serves ``models``."""
    where = endpoint.base_url or "https://api.openai.com/v1"
    client = endpoint.client()
    try:
        served = [model.id async for model in client.models.list()]
    except openai.AuthenticationError as error:
        raise ConfigurationError(
            f"the model endpoint {where} rejected the API key (HTTP {error.status_code}); "
            "check OPENAI_API_KEY"
        ) from None
    except openai.PermissionDeniedError as error:
        raise ConfigurationError(
            f"the model endpoint {where} refused access (HTTP {error.status_code}); "
            "check the API key's permissions"
        ) from None
    except openai.NotFoundError:
        return  # this server has no model list; the first call will tell
    except openai.APIConnectionError as error:
        raise InfrastructureError(
            f"the model endpoint {where} could not be reached after {endpoint.retries + 1} "
            f"attempt(s) ({error.__cause__ or error}); check that the server is running "
            "and the base URL is right",
            code=ErrorCode.MODEL_UNREACHABLE,
            retryable=True,
        ) from None
    except openai.APIStatusError as error:
        raise InfrastructureError(
            f"the model endpoint {where} answered HTTP {error.status_code} to the model list: "
            f"{error.message}",
            code=ErrorCode.MODEL_ERROR,
            retryable=error.status_code >= 500,
        ) from None
    except openai.OpenAIError as error:
        raise ConfigurationError(
            f"{where} did not answer like an OpenAI-compatible endpoint ({error}); "
            "the base URL usually ends in /v1"
        ) from None
    finally:
        await client.close()
    if not served:
        return
    unknown = [model for model in models if not _serves(served, model)]
    if unknown:
        shown = ", ".join(served[:_LISTED_MODELS_SHOWN])
        more = f" and {len(served) - _LISTED_MODELS_SHOWN} more" if len(served) > 5 else ""
        raise ConfigurationError(
            f"the model endpoint {where} does not serve {', '.join(unknown)} "
            f"(it serves {shown}{more}); choose one with --model"
        )


def _serves(served: list[str], model: str) -> bool:
    # Ollama lists "name:tag" and answers to the bare name for ":latest".
    return model in served or f"{model}:latest" in served
