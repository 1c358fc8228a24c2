from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from subtlebench import views
from subtlebench.pages import post_only

# The home page ("", name "home") says what waits for each role: it reads the annotator's models, so it is served
# from annotator/urls.py (annotator/home.py).
urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", post_only("home")(auth_views.LogoutView.as_view()), name="logout"),
    path("account/tokens/", views.account_tokens, name="account-tokens"),
    path("account/tokens/<int:token_id>/revoke/", views.account_token_revoke, name="account-token-revoke"),
    re_path(r"^media/(?P<name>.+)$", views.media, name="media"),
    path("admin/", admin.site.urls),
    path("api/", include("api.urls")),
    path("", include("annotator.urls")),
    path("", include("evaluation.urls")),
]

# 500s (DEBUG off): the API's JSON body under /api/, 503 when the database or broker is down (subtlebench/views.py).
handler500 = "subtlebench.views.server_error"
# Under /api/ these answer the API's JSON error body (the schema's 400 and 404), elsewhere the HTML page.
handler400 = "subtlebench.views.bad_request"
handler404 = "subtlebench.views.not_found"
