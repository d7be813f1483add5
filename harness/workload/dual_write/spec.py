"""Where a dual writer's database is: SQLite (the default, a file in the run directory) or
PostgreSQL (a DSN)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from ..spec import SpecModel


class DatabaseSpec(SpecModel):
    kind: Literal["sqlite", "postgresql"] = Field(
        default="sqlite", description="sqlite (embedded, the default) or postgresql"
    )
    path: Annotated[str, Field(min_length=1)] = Field(
        default="dual_write.sqlite",
        description="sqlite: the database file, relative to the run directory",
    )
    dsn: str | None = Field(
        default=None, description="postgresql: the connection string (libpq DSN or URI)"
    )

    @model_validator(mode="after")
    def _where(self) -> DatabaseSpec:
        if self.kind == "postgresql" and not self.dsn:
            raise ValueError("dsn: a postgresql database needs a dsn")
        if self.kind == "sqlite" and self.dsn:
            raise ValueError("dsn: only for kind postgresql (sqlite takes a path)")
        return self

    def sqlite_path(self, run_dir: Path) -> Path:
        p = Path(self.path)
        return p if p.is_absolute() else run_dir / p
