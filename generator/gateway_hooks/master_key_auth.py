"""LiteLLM proxy custom auth: only the master key opens the gateway; anything else is a 401.

Referenced from the generated config.yaml, with this file copied next to it:

    general_settings:
      custom_auth: master_key_auth.user_api_key_auth

Why: without a database, LiteLLM answers a wrong key with 400 "No connected db." and a missing
key with a 500 (its error path imports the optional prisma package). Clients and their retry
logic need a plain 401. The comparison is constant-time.
"""

from __future__ import annotations

import os
import secrets

from fastapi import HTTPException, Request

from litellm.proxy._types import LitellmUserRoles, UserAPIKeyAuth

MASTER_KEY_ENV = "LITELLM_MASTER_KEY"


async def user_api_key_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    expected = os.environ.get(MASTER_KEY_ENV, "")
    given = (api_key or "").removeprefix("Bearer ").strip()
    if expected and given and secrets.compare_digest(given.encode(), expected.encode()):
        return UserAPIKeyAuth(api_key="gateway-master-key", user_role=LitellmUserRoles.PROXY_ADMIN,
                              user_id="gateway-admin")
    raise HTTPException(status_code=401, detail="missing or invalid API key: send `Authorization: Bearer <key>`")
