from django.apps import AppConfig


class SubtlebenchConfig(AppConfig):
    name = "subtlebench"
